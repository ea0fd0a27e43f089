/*
 * plain.c - which exec commands the ready shell may `exec` in place.
 *
 * A shell reading its script (the ready shell, exec.c) forks for each
 * external command, and in gVisor a fork costs as much as the whole rest of
 * an exec (it copies the shell's address space on the host). When the
 * command is one simple command naming an external program, `exec CMD`
 * runs it in the shell's own process instead: the same pid, process group,
 * descriptors, environment and exit status, without the fork.
 *
 * "Plain" is decided on the text alone and errs towards no: every byte is a
 * letter, digit, blank or one of `_-./,:+@%=` (no quote, expansion,
 * redirection, separator, glob or comment can be there), the first word
 * begins with a letter, digit, `/`, `.` or `_` (`exec -l` or `exec %1` is
 * an option or job of `exec` itself), has no `=` (an assignment is not a
 * command), and is not one
 * the shell runs itself (a builtin or a keyword: `exec true` would exec
 * /bin/true where the builtin costs nothing; `exec cd /` is not `cd /`).
 * Anything else runs as written.
 */
#include <stdbool.h>
#include <string.h>

#include "runtime/agent/inside/inside.h"

/* Builtins and keywords of POSIX sh, busybox ash, dash and bash, sorted. */
static const char *const shell_words[] = {
    "!",	".",	    ":",       "[",	 "[[",	   "alias",    "bg",	  "bind",
    "break",	"builtin",  "caller",  "case",	 "cd",	   "chdir",    "command", "compgen",
    "complete", "continue", "declare", "dirs",	 "disown", "do",       "done",	  "echo",
    "elif",	"else",	    "enable",  "esac",	 "eval",   "exec",     "exit",	  "export",
    "false",	"fc",	    "fg",      "fi",	 "for",	   "function", "getopts", "hash",
    "help",	"history",  "if",      "in",	 "jobs",   "kill",     "let",	  "local",
    "logout",	"mapfile",  "popd",    "printf", "pushd",  "pwd",      "read",	  "readarray",
    "readonly", "return",   "select",  "set",	 "shift",  "shopt",    "source",  "suspend",
    "test",	"then",	    "time",    "times",	 "trap",   "true",     "type",	  "typeset",
    "ulimit",	"umask",    "unalias", "unset",	 "until",  "wait",     "while",
};

static bool plain_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == ' ' || c == '\t' || strchr("_-./,:+@%=", c) != NULL;
}

/* What a program's name or path may begin with: not `-` or `%`, which `exec` takes as its own. */
static bool first_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '/' || c == '.' || c == '_';
}

bool exec_is_plain(const char *cmd, size_t n)
{
	size_t i = 0;
	for (size_t k = 0; k < n; k++)
		if (!cmd[k] || !plain_byte((unsigned char)cmd[k]))
			return false;
	while (i < n && (cmd[i] == ' ' || cmd[i] == '\t'))
		i++;
	size_t start = i;
	while (i < n && cmd[i] != ' ' && cmd[i] != '\t')
		i++;
	size_t len = i - start;
	if (len == 0 || memchr(cmd + start, '=', len) || !first_byte((unsigned char)cmd[start]))
		return false;
	for (size_t k = 0; k < sizeof(shell_words) / sizeof(shell_words[0]); k++)
		if (strlen(shell_words[k]) == len && memcmp(shell_words[k], cmd + start, len) == 0)
			return false;
	return true;
}
