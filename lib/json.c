#include "lib/json.h"

#include <errno.h>
#include <stdlib.h>

void json_deletep(cJSON **j)
{
	cJSON_Delete(*j);
}

cJSON *json_text_or_null(const char *s)
{
	return *s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

cJSON *json_time_or_null(int64_t ms)
{
	char when[32];
	if (ms == 0)
		return cJSON_CreateNull();
	format_time(ms, when);
	return cJSON_CreateString(when);
}

bool json_add(cJSON *obj, const char *key, cJSON *item)
{
	if (item && cJSON_AddItemToObject(obj, key, item))
		return true;
	cJSON_Delete(item);
	return false;
}

int json_print(struct strbuf *out, cJSON *obj)
{
	_cleanup_free_ char *text = obj ? cJSON_Print(obj) : NULL;
	cJSON_Delete(obj);
	if (!text)
		return -ENOMEM;
	strbuf_adds(out, text);
	strbuf_add(out, "\n", 1);
	return strbuf_error(out);
}
