/* proto/text.h — text that came from a client, made safe to send back in a
 * reply or to write into the log: strict UTF-8 checks, escaping, and
 * truncation on character boundaries. No I/O; shared by daemon and client.
 *
 * Strict UTF-8 is RFC 3629's: each character in its shortest form (no
 * overlong C0 80 for U+0000), no UTF-16 surrogates (U+D800..U+DFFF), nothing
 * above U+10FFFF, no sequence cut short. msgpack clients that decode strings
 * strictly (Python's msgpack, raw=False) reject anything else, so every
 * string vkgradd sends must be that (proto/msg.c checks at encoding time).
 */
#ifndef VKG_PROTO_TEXT_H
#define VKG_PROTO_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Characters of a client's string echoed in an error message: an op name,
 * resp. a dtype or variant name (the valid ones are 8 characters at most). */
#define PROTO_TEXT_ECHO_OP 40
#define PROTO_TEXT_ECHO_NAME 16
/* Characters of a client's string written into the daemon log. */
#define PROTO_TEXT_LOG_CHARS 64
/* Bytes that escaping `chars` characters can take, with "..." and the NUL:
 * each character becomes at most 6 bytes (`\u0085`, or 4 bytes of \xHH
 * per byte of an ill-formed sequence, one byte at a time). */
#define PROTO_TEXT_ESCAPED_CAP(chars) ((chars) * 6 + 4)

/* The well-formed character at s[0..n): returns its length in bytes (1..4)
 * and stores its code point in *cp (cp may be NULL); returns 0 when n is 0
 * or s does not start with a well-formed character. */
size_t proto_text_char(const void *s, size_t n, uint32_t *cp);

/* Is s[0..n) strict UTF-8? (An empty string is.) */
bool proto_text_valid(const void *s, size_t n);

/* Where to cut s[0..n) to keep at most max bytes without splitting a
 * character: min(n, max) moved back to the start of the character that
 * straddles it. For valid UTF-8 the prefix is valid UTF-8. */
size_t proto_text_truncate(const void *s, size_t n, size_t max);

/* Flags of proto_text_escape. */
enum {
	/* leave '\' as it is: for text already escaped (the log's last
	 * check), where doubling it would garble the escapes in it */
	PROTO_TEXT_KEEP_BACKSLASH = 1u,
};

/* Copy s[0..n) into out (cap bytes, NUL included; cap >= 1) as strict UTF-8
 * holding no control character, so that it can neither break a reply nor
 * start a log line of its own:
 *   - '\' becomes "\\" (unless PROTO_TEXT_KEEP_BACKSLASH), so every escape
 *     below reads back unambiguously;
 *   - \n \r \t become "\n" "\r" "\t", the other C0 controls and DEL
 *     "\xHH", the C1 controls (U+0080..U+009F) "\u00HH";
 *   - each byte that does not belong to a well-formed character becomes
 *     "\xHH" (so an invalid ff reads "\xff");
 *   - everything else is copied.
 * At most max_chars characters of s are taken (an ill-formed byte counts
 * as one); when s is longer, or out too small, out ends with "..." after
 * the last whole character or escape that fits (never inside one; with cap
 * < 4, where "..." cannot fit, without it). Returns strlen(out). */
size_t proto_text_escape(char *out, size_t cap, const void *s, size_t n, size_t max_chars,
			 unsigned flags);

#endif
