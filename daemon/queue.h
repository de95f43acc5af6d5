/* daemon/queue.h — the daemon's one intrusive doubly linked list (after
 * libuv's queue.h): a list head and its elements' links are both a
 * queue_node, the list circular through the head. An element embeds a
 * node and is found from it with queue_data. A node not on any list has
 * NULL links (as calloc leaves it, and queue_remove leaves it), so
 * inserting a node twice or removing one that is not on a list fails an
 * assertion instead of corrupting the list. Not thread-safe: the caller
 * owns the list. */
#ifndef VKG_DAEMON_QUEUE_H
#define VKG_DAEMON_QUEUE_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct queue_node {
	struct queue_node *next, *prev;
} queue_node;

/* A list head, empty, for a static definition: queue_node h = QUEUE_INIT(h); */
#define QUEUE_INIT(h) {&(h), &(h)}

/* The element of type `type` whose member `field` is node n. */
#define queue_data(n, type, field) ((type *)((char *)(n) - offsetof(type, field)))

/* Each node of list h from the first to the last: the body may not remove
 * n (use queue_first in a loop for that). */
#define queue_foreach(n, h) for ((n) = (h)->next; (n) != (h); (n) = (n)->next)

static inline void queue_init(queue_node *h)
{
	h->next = h->prev = h;
}

static inline bool queue_empty(const queue_node *h)
{
	assert(h->next && h->prev);
	return h->next == h;
}

/* Is node n on a list? */
static inline bool queue_linked(const queue_node *n)
{
	return n->next != NULL;
}

/* The first node of h, or NULL when it is empty. */
static inline queue_node *queue_first(const queue_node *h)
{
	return queue_empty(h) ? NULL : h->next;
}

/* n, not on a list, becomes h's last node. */
static inline void queue_insert_tail(queue_node *h, queue_node *n)
{
	assert(!queue_linked(n) && h->prev->next == h);
	n->next = h;
	n->prev = h->prev;
	n->prev->next = n;
	h->prev = n;
}

/* n, not on a list, becomes h's first node. */
static inline void queue_insert_head(queue_node *h, queue_node *n)
{
	assert(!queue_linked(n) && h->next->prev == h);
	n->prev = h;
	n->next = h->next;
	n->next->prev = n;
	h->next = n;
}

/* Takes n off its list. */
static inline void queue_remove(queue_node *n)
{
	assert(queue_linked(n) && n->next->prev == n && n->prev->next == n);
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = NULL;
}

#endif
