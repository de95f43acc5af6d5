/* daemon/log.c — see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_level = LOG_INFO;
static int g_journal;

void log_init(int level)
{
	g_level = level;
	g_journal = getenv("JOURNAL_STREAM") != NULL;
}

int log_level(void)
{
	return g_level;
}

int log_parse_level(const char *s)
{
	static const char *names[] = {"", "", "", "error", "warn", "notice", "info", "debug"};
	for (int i = 3; i <= 7; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	if (s[0] >= '3' && s[0] <= '7' && s[1] == 0)
		return s[0] - '0';
	return -1;
}

void log_msg(int level, const char *fmt, ...)
{
	static const char *words[] = {"", "", "", "error", "warning", "notice", "info", "debug"};
	if (level > g_level)
		return;
	char line[1024];
	int n = g_journal ? snprintf(line, sizeof(line), "<%d>", level)
			  : snprintf(line, sizeof(line), "vkgradd: %s: ", words[level]);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	/* one write per line so lines from threads never interleave */
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}
