/* srv_queue.h - per-model (per signature) request queues with bounds and
 * round-robin scheduling across them, served by the gRPC worker pool.
 *
 * Each queue is named by a key ("model\nsignature", taken from the request
 * bytes by srv_queue_key before anything is unpacked). A push into a full
 * queue fails at once (the caller answers UNAVAILABLE). Workers pop from the
 * queues in turn (round-robin over the queues that have work), so a model
 * with a deep queue cannot delay another model's requests by more than one
 * turn; one key never runs on more than `run_cap` workers at a time, so a
 * saturating model always leaves a worker for the others. Keys live while
 * they have queued or running items, and up to 16 idle keys stay (with the
 * measured cost of a run, which decides what may run inline) while no more
 * than 16 keys live (a client naming random models cannot grow the table
 * beyond the calls in flight plus 16). */
#ifndef SRV_QUEUE_H
#define SRV_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#define SRV_QUEUE_KEY_MAX 320

typedef struct srv_queue srv_queue;
typedef struct srv_qkey srv_qkey;

/* bound: the most items waiting per key (>= 1); run_cap: the most items of
 * one key being run at once (>= 1). NULL when out of memory. */
srv_queue *srv_queue_new(int bound, int run_cap);
void srv_queue_free(srv_queue *q);

/* Queues item under key. 0 on success; -1 when that key's queue holds
 * `bound` items already (or the queue is stopped). */
int srv_queue_push(srv_queue *q, const char *key, void *item);
/* Blocks for the next item (round-robin across keys). Returns NULL once
 * stopped and empty. *token is handed back to srv_queue_done after the run. */
void *srv_queue_pop(srv_queue *q, srv_qkey **token);
void srv_queue_done(srv_queue *q, srv_qkey *token);
/* srv_queue_done, and `seconds` (>= 0) is how long the run took: it feeds
 * the key's moving average cost that srv_queue_try_run_cheap reads. */
void srv_queue_done_timed(srv_queue *q, srv_qkey *token, double seconds);
/* Takes a run slot of key without queueing, when nothing of that key is
 * waiting and it is under run_cap (the caller runs the item itself, then
 * calls srv_queue_done). NULL when it would have to wait. */
srv_qkey *srv_queue_try_run(srv_queue *q, const char *key);
/* srv_queue_try_run for a key already known whose measured average run is
 * at most max_cost_s (a key never timed, or one slower, gets NULL: its
 * calls go through the queue, where they are timed). */
srv_qkey *srv_queue_try_run_cheap(srv_queue *q, const char *key, double max_cost_s);
/* Wakes every worker; pops return NULL once nothing is queued. */
void srv_queue_stop(srv_queue *q);

/* The bound in force. */
int srv_queue_bound(const srv_queue *q);

/* The key of a request without unpacking it: field `name_field` (a string)
 * of the message in field `spec_field` of the top message (spec_field 0: the
 * top message itself), then "\n", then the string in `sig_field` of the same
 * message (0: none). Only the first `n` bytes are read (a prefix is enough
 * when the fields come first, as serialisers write them). Writes "" when the
 * fields are not found. */
void srv_queue_key(const uint8_t *p, size_t n, int spec_field, int name_field, int sig_field,
                   char *out, size_t cap);

#endif /* SRV_QUEUE_H */
