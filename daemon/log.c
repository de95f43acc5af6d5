/* daemon/log.c — see log.h. */
#include "log.h"

#include "text.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_level = LOG_LEVEL_INFO;
static int g_journal;

void log_init(int level, bool journal)
{
	g_level = level;
	g_journal = journal;
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

/* Nothing to escape: printable ASCII only (the usual line). */
static bool log_plain(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

void log_msg(int level, const char *fmt, ...)
{
	static const char *words[] = {"", "", "", "error", "warning", "notice", "info", "debug"};
	if (level > g_level)
		return;
	char msg[1024], line[2048];
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	size_t len = m < 0 ? 0 : (size_t)m < sizeof(msg) ? (size_t)m : sizeof(msg) - 1;
	/* journald stamps each line itself; anywhere else (a terminal, a
	 * file, another supervisor) the line carries its local time, ISO 8601
	 * with milliseconds and the UTC offset */
	int n;
	if (g_journal) {
		n = snprintf(line, sizeof(line), "<%d>", level);
	} else {
		struct timespec ts;
		struct tm tm;
		char when[40] = "";
		clock_gettime(CLOCK_REALTIME, &ts);
		if (localtime_r(&ts.tv_sec, &tm)) {
			char zone[8];
			size_t w = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
			strftime(zone, sizeof(zone), "%z", &tm);
			snprintf(when + w, sizeof(when) - w, ".%03ld%s ", ts.tv_nsec / 1000000L, zone);
		}
		n = snprintf(line, sizeof(line), "%svkgradd: %s: ", when, words[level]);
	}
	size_t o = (size_t)n;
	/* One event, one line, valid UTF-8, whatever the message holds: a
	 * line break in it would start a line of its own (under journald one
	 * of any priority, "<0>..."), so every control character and byte
	 * that is not UTF-8 is escaped here, whoever forgot to (text from
	 * clients is escaped where it is logged: proto/text.h). Backslashes
	 * stay: the message may hold escapes already. */
	if (log_plain(msg, len)) {
		memcpy(line + o, msg, len);
		o += len;
	} else {
		o += proto_text_escape(line + o, sizeof(line) - o - 1, msg, len, SIZE_MAX,
				       PROTO_TEXT_KEEP_BACKSLASH);
	}
	line[o++] = '\n';
	/* one write per line so lines from threads never interleave */
	ssize_t w = write(STDERR_FILENO, line, o);
	(void)w;
}
