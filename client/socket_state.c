/* client/socket_state.c — cli_socket_idle (cli.h): whether connecting to a
 * socket would start a daemon that is not running, asked of systemd.
 *
 * A connection to a socket-activated daemon's socket starts the daemon;
 * the metrics scrape must not do that to an idle GPU. systemd knows: the
 * socket unit whose Listen= is the path is in sub-state "listening" while
 * its service is not running (the service holds it: "running"). Asked
 * over D-Bus (sd-bus): the system manager, or the user's for a socket
 * under $XDG_RUNTIME_DIR. No bus, no systemd or no such unit: the caller
 * connects, as any client would. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-bus.h>

#define SD_DEST "org.freedesktop.systemd1"

/* The Listen= addresses of the socket unit at obj: 1 when one is path. */
static int unit_listens_on(sd_bus *bus, const char *obj, const char *path)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *m = NULL;
	int found = 0;
	if (sd_bus_get_property(bus, SD_DEST, obj, "org.freedesktop.systemd1.Socket", "Listen", &e,
				&m, "a(ss)") < 0)
		goto out;
	if (sd_bus_message_enter_container(m, 'a', "(ss)") < 0)
		goto out;
	const char *type, *addr;
	while (sd_bus_message_read(m, "(ss)", &type, &addr) > 0)
		if (strcmp(addr, path) == 0)
			found = 1;
out:
	sd_bus_message_unref(m);
	sd_bus_error_free(&e);
	return found;
}

int cli_socket_idle(const char *path, char *why, size_t why_len)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	size_t rl = rt ? strlen(rt) : 0;
	bool user = rl && strncmp(path, rt, rl) == 0 && path[rl] == '/';
	sd_bus *bus = NULL;
	if ((user ? sd_bus_open_user(&bus) : sd_bus_open_system(&bus)) < 0)
		return -1;
	sd_bus_set_method_call_timeout(bus, 2000000);
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	int rc = -1;
	if (sd_bus_call_method(bus, SD_DEST, "/org/freedesktop/systemd1",
			       "org.freedesktop.systemd1.Manager", "ListUnitsByPatterns", &e, &reply,
			       "asas", 0, 1, "*.socket") < 0)
		goto out;
	if (sd_bus_message_enter_container(reply, 'a', "(ssssssouso)") < 0)
		goto out;
	rc = 0;
	const char *name, *desc, *load, *active, *sub, *follow, *obj, *jtype, *jobj;
	uint32_t jid;
	while (sd_bus_message_read(reply, "(ssssssouso)", &name, &desc, &load, &active, &sub, &follow,
				   &obj, &jid, &jtype, &jobj) > 0) {
		if (!unit_listens_on(bus, obj, path))
			continue;
		if (strcmp(sub, "listening") == 0) {
			snprintf(why, why_len, "%s is listening and its service is not running", name);
			rc = 1;
		}
		break;
	}
out:
	sd_bus_message_unref(reply);
	sd_bus_error_free(&e);
	sd_bus_flush_close_unref(bus);
	return rc;
}
