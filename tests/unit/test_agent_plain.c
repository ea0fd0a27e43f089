/*
 * test_agent_plain.c - which exec commands the agent's ready shell runs in
 * place (runtime/agent/inside/plain.c): one simple command naming a
 * program, and nothing a shell would read differently with `exec` before it.
 */
#include "runtime/agent/inside/inside.h"
#include "tests/unit/t.h"

static bool plain(const char *cmd)
{
	return exec_is_plain(cmd, strlen(cmd));
}

int main(void)
{
	/* One external command, with plain arguments: in place. */
	CHECK(plain("/bin/true"));
	CHECK(plain("ls -l /tmp"));
	CHECK(plain("  cat /proc/self/stat"));
	CHECK(plain("python3 -m http.server 8080"));
	CHECK(plain("tar -C /x -cf /tmp/a.tar ."));
	CHECK(plain("env"));
	/* What the shell runs itself stays the shell's: a builtin costs no exec. */
	CHECK(!plain("true"));
	CHECK(!plain("echo hi"));
	CHECK(!plain("cd /tmp"));
	CHECK(!plain("exit 3"));
	CHECK(!plain("exec ls"));
	CHECK(!plain("[ -e /x ]"));
	CHECK(!plain("test -e /x"));
	CHECK(!plain("kill -9 12"));
	CHECK(!plain("read x"));
	CHECK(!plain("if true"));
	/* An assignment, and anything with syntax, runs as written. */
	CHECK(!plain("FOO=1 env"));
	CHECK(!plain("ls; ls"));
	CHECK(!plain("ls | wc"));
	CHECK(!plain("ls && ls"));
	CHECK(!plain("ls > /tmp/x"));
	CHECK(!plain("ls < /tmp/x"));
	CHECK(!plain("echo $HOME"));
	CHECK(!plain("ls *"));
	CHECK(!plain("ls ~"));
	CHECK(!plain("ls 'a b'"));
	CHECK(!plain("ls \"a\""));
	CHECK(!plain("ls `pwd`"));
	CHECK(!plain("ls \\n"));
	CHECK(!plain("ls # c"));
	CHECK(!plain("sleep 9 &"));
	CHECK(!plain("(ls)"));
	CHECK(!plain("{ ls; }"));
	CHECK(!plain("ls\nrm x"));
	CHECK(!exec_is_plain("ls\0rm", 5));
	CHECK(!plain(""));
	CHECK(!plain("   "));
	CHECK(!plain("ls ?"));
	CHECK(!plain("ls [ab]"));
	CHECK(!plain("!ls"));
	/* What `exec` would read as its own option or a job: as written (a review: `exec -l`). */
	CHECK(!plain("-l"));
	CHECK(!plain("--help"));
	CHECK(!plain("%1"));
	CHECK(!plain("+x"));
	CHECK(plain("./run.sh"));
	CHECK(plain("_tool -x"));
	return t_done();
}
