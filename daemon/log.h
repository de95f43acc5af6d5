/* daemon/log.h — one line per event on stderr. Levels follow syslog's
 * numbering; when stderr is the journal ($JOURNAL_STREAM) lines carry the
 * "<N>" prefix journald understands, otherwise a plain level word. A
 * message never spans lines and is valid UTF-8: control characters and
 * bytes that are not UTF-8 in it are escaped (proto/text.h), and a message
 * longer than 1023 bytes is cut. Text a client controls is escaped and
 * bounded (PROTO_TEXT_LOG_CHARS) where it is logged all the same. */
#ifndef VKG_DAEMON_LOG_H
#define VKG_DAEMON_LOG_H

#include <stdbool.h>

/* syslog's numbers under names of our own: <syslog.h> defines LOG_ERR …
 * LOG_DEBUG as macros, and a file may include both */
enum {
	LOG_LEVEL_ERR = 3,
	LOG_LEVEL_WARN = 4,
	LOG_LEVEL_NOTICE = 5,
	LOG_LEVEL_INFO = 6,
	LOG_LEVEL_DEBUG = 7,
};

/* journal: stderr is the journal ($JOURNAL_STREAM set, config_env) */
void log_init(int level, bool journal);
int log_level(void);
/* Parses "error|warn|notice|info|debug" or a digit; -1 when unknown. */
int log_parse_level(const char *s);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LEVEL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LEVEL_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
