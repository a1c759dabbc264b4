/* The event queue, ordered by (time, insertion sequence) so runs are deterministic.
 *
 * A calendar of CAL_BUCKETS buckets of 2^CAL_SHIFT ps covers the next ~67 us; a bucket is an
 * unsorted list of blocks of CAL_BLOCK events (a bucket holds dozens of events on a large fabric:
 * read a block at a time, not an event at a time through links), found by a bitmap. The bucket
 * being drained is sorted once into an array ("cur") run in order; events made for it while it
 * runs go to a small 4-ary heap ("now"), the earlier of the two heads running first. Events
 * beyond the calendar wait in another 4-ary heap ("later") until the calendar reaches them.
 */
#include "sim.h"

#include <stdlib.h>

static inline int ev_less(const Event *x, const Event *y) {
    return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static void heap_push(Heap *h, Event e) {
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 256;
        h->ev = huge_grow(h->ev, (size_t)h->n * sizeof(Event), (size_t)h->cap * sizeof(Event));
    }
    int64_t i = h->n++;
    while (i > 0) {
        int64_t parent = (i - 1) / 4;
        if (!ev_less(&e, &h->ev[parent])) break;
        h->ev[i] = h->ev[parent];
        i = parent;
    }
    h->ev[i] = e;
}

static Event heap_pop(Heap *h) {
    Event top = h->ev[0];
    Event last = h->ev[--h->n];
    int64_t i = 0, n = h->n;
    for (;;) {
        int64_t c = 4 * i + 1;
        if (c >= n) break;
        int64_t best = c, end = c + 4 < n ? c + 4 : n;
        for (int64_t k = c + 1; k < end; k++)
            if (ev_less(&h->ev[k], &h->ev[best])) best = k;
        if (!ev_less(&h->ev[best], &last)) break;
        h->ev[i] = h->ev[best];
        i = best;
    }
    if (n > 0) h->ev[i] = last;
    return top;
}

#define CAL_WIDTH ((ps_t)1 << CAL_SHIFT)
#define CAL_SPAN (CAL_WIDTH * CAL_BUCKETS)

/* the slot of a new event at time t in its calendar bucket (t is within the calendar's span) */
static inline Event *cal_slot(EventQueue *q, ps_t t) {
    int64_t b = (t >> CAL_SHIFT) & (CAL_BUCKETS - 1);
    /* the block being filled and its count, both from head[]: the block is written, not read */
    int32_t head = q->head[b], k = head >> CAL_BLOCK_BITS, n = head & CAL_BLOCK;
    if (head < 0 || n == CAL_BLOCK) {
        if (q->free < 0)
            q->blocks = pool_grow(q->blocks, sizeof(CalBlock), offsetof(CalBlock, next), &q->cap, &q->free, 256);
        int32_t fresh = q->free;
        q->free = q->blocks[fresh].next;
        q->blocks[fresh].next = head < 0 ? -1 : k; /* a new block in front of the bucket's */
        if (head < 0) q->bits[b >> 6] |= 1ULL << (b & 63);
        k = fresh;
        n = 0;
    }
    q->head[b] = k << CAL_BLOCK_BITS | (n + 1);
    q->in_calendar++;
    return &q->blocks[k].ev[n];
}

static void prefetch_block(const CalBlock *B) {
    for (size_t line = 0; line < sizeof(CalBlock); line += 64) __builtin_prefetch((const char *)B + line);
}

void ev_push(Sim *s, ps_t t, int type, int a, int b, int c) {
    EventQueue *q = &s->evq;
    q->count++;
    if (t >= q->now_end && t < q->now_end - CAL_WIDTH + CAL_SPAN) { /* written in place (the most) */
        Event *e = cal_slot(q, t);
        e->t = t, e->seq = s->seq++, e->type = type, e->a = a, e->b = b, e->c = c;
        return;
    }
    heap_push(t < q->now_end ? &q->now : &q->later, (Event){t, s->seq++, type, a, b, c});
}

/* the first non-empty bucket at or after bucket `from`, cyclically; -1 if none */
static int64_t next_bucket(const EventQueue *q, int64_t from) {
    for (int64_t k = 0; k <= CAL_WORDS; k++) {
        int64_t w = ((from >> 6) + k) & (CAL_WORDS - 1);
        uint64_t bits = q->bits[w];
        if (k == 0) bits &= ~0ULL << (from & 63);
        if (k == CAL_WORDS) bits &= ~(~0ULL << (from & 63));
        if (bits) return w * 64 + __builtin_ctzll(bits);
    }
    return -1;
}

#define DIGIT_LO (CAL_SHIFT / 2) /* the sort's two digits of an event's time in its bucket */
#define DIGIT_HI (CAL_SHIFT - DIGIT_LO)
#define SORT_SMALL 16 /* buckets of up to this many events: an insertion sort */

/* bucket b's events into cur, in (time, seq) order, its blocks given back. A bucket's events
 * were written in seq order (the later heap's events it took, in (time, seq) order, all before
 * the others: they came in at the advance where the calendar first covered it), so a stable sort
 * by time is the (time, seq) order: an insertion sort of a few, else an LSD radix sort of the
 * time's low bits in two digits, in place of pushing each event into a heap and popping it */
static void take_bucket(EventQueue *q, int64_t b) {
    int64_t n = 0;
    for (int32_t k = q->head[b] >> CAL_BLOCK_BITS, m = q->head[b] & CAL_BLOCK; k >= 0; m = CAL_BLOCK) {
        CalBlock *B = &q->blocks[k];
        int32_t next = B->next;
        if (next >= 0) prefetch_block(&q->blocks[next]);
        if (n + CAL_BLOCK > q->cur_cap) {
            q->cur_cap = q->cur_cap ? q->cur_cap * 2 : 256;
            q->cur = realloc(q->cur, (size_t)q->cur_cap * sizeof(Event));
            q->tmp = realloc(q->tmp, (size_t)q->cur_cap * sizeof(Event));
        }
        for (int i = m - 1; i >= 0; i--) q->tmp[n++] = B->ev[i]; /* newest first: reversed below */
        B->next = q->free;
        q->free = k;
        k = next;
    }
    q->in_calendar -= n;
    q->cur_i = 0;
    q->cur_n = n;
    if (n <= SORT_SMALL) { /* an insertion sort, oldest first, each after those of its time or before */
        for (int64_t i = n - 1, j; i >= 0; i--) {
            Event e = q->tmp[i];
            for (j = n - 1 - i; j > 0 && q->cur[j - 1].t > e.t; j--) q->cur[j] = q->cur[j - 1];
            q->cur[j] = e;
        }
        return;
    }
    int32_t lo[1 << DIGIT_LO] = {0}, hi[1 << DIGIT_HI] = {0};
    for (int64_t i = 0; i < n; i++) {
        lo[q->tmp[i].t & ((1 << DIGIT_LO) - 1)]++;
        hi[(q->tmp[i].t >> DIGIT_LO) & ((1 << DIGIT_HI) - 1)]++;
    }
    for (int32_t d = 0, sum = 0; d < 1 << DIGIT_LO; d++) sum += lo[d], lo[d] = sum - lo[d];
    for (int32_t d = 0, sum = 0; d < 1 << DIGIT_HI; d++) sum += hi[d], hi[d] = sum - hi[d];
    for (int64_t i = n - 1; i >= 0; i--) q->cur[lo[q->tmp[i].t & ((1 << DIGIT_LO) - 1)]++] = q->tmp[i];
    for (int64_t i = 0; i < n; i++) q->tmp[hi[(q->cur[i].t >> DIGIT_LO) & ((1 << DIGIT_HI) - 1)]++] = q->cur[i];
    Event *sorted = q->tmp;
    q->tmp = q->cur;
    q->cur = sorted;
}

/* make the next non-empty stretch of time the current bucket */
static void advance(EventQueue *q) {
    ps_t start = q->now_end;
    if (q->in_calendar == 0) {
        if (q->later.n == 0) return;
        start = q->later.ev[0].t & ~(CAL_WIDTH - 1); /* jump over the empty calendar */
    } else {
        int64_t from = (start >> CAL_SHIFT) & (CAL_BUCKETS - 1);
        int64_t b = next_bucket(q, from);
        start += ((b - from) & (CAL_BUCKETS - 1)) << CAL_SHIFT;
    }
    q->now_end = start + CAL_WIDTH;
    /* later events the calendar now covers move into it (or into the current bucket) */
    while (q->later.n > 0 && q->later.ev[0].t < start + CAL_SPAN) {
        Event e = heap_pop(&q->later);
        if (e.t < q->now_end)
            heap_push(&q->now, e);
        else
            *cal_slot(q, e.t) = e;
    }
    int64_t b = (start >> CAL_SHIFT) & (CAL_BUCKETS - 1);
    if (q->head[b] < 0) return; /* the later events only */
    take_bucket(q, b);
    q->head[b] = -1;
    q->bits[b >> 6] &= ~(1ULL << (b & 63));
    /* the next bucket's first block, written long ago, is fetched while this one's events run
     * (reading the calendar was most of ev_next's time at 1,024 servers) */
    if (q->in_calendar > 0) {
        int64_t next = next_bucket(q, (b + 1) & (CAL_BUCKETS - 1));
        if (next >= 0) prefetch_block(&q->blocks[q->head[next] >> CAL_BLOCK_BITS]);
    }
}

/* what an event reads first, its port (first line) and packet, and for a frame's end at a NIC
 * (Event.b) the port's line with its flows: most of an event's time on a large fabric was the
 * misses on them (a switch's port does not read that line at a frame's end: read there, it was
 * a miss for nothing). Read, not prefetched: a bucket's burst of prefetches (a hundred at 1,024 servers) saved
 * nothing measurable, its loads an eighth of sim_run (docs/simulator.md, "Loads, not
 * prefetches") */
static inline void touch_event(const Sim *s, const Event *e) {
    if (e->type == EV_ARRIVE) touch(&s->pkts[e->b]);
    if (e->type == EV_ARRIVE || e->type == EV_TX_DONE) touch(&s->ports[e->a]);
    if (e->type == EV_TX_DONE && e->b) touch(&s->ports[e->a].active); /* a NIC's flows */
}

/* what a frame's end reads next, its bucket's first reads done: at a NIC the flow its round robin
 * is at and that flow's pacing state, at a switch each queue's head packet (DWRR reads its size)
 * and the PG it came in by (its release) */
static inline void touch_sender(const Sim *s, const Event *e) {
    if (e->type != EV_TX_DONE) return;
    const Port *P = &s->ports[e->a];
    if (!s->nodes[P->node].is_switch) {
        if (P->n_active == 0) return;
        const Flow *F = &s->flows[P->active[P->rr < P->n_active ? P->rr : 0].flow];
        touch(F);
        if (F->run >= 0) touch(&s->runs[F->run]);
        return;
    }
    for (unsigned q = P->nonempty; q; q &= q - 1) {
        const Lane *L = &P->lane[__builtin_ctz(q)];
        if (L->head < 0) continue;
        const Pkt *K = &s->pkts[L->head];
        if (K->in_port >= 0) touch(&s->ports[K->in_port].lane[K->pg].res);
    }
}

int ev_next(Sim *s, ps_t until, Event *out) {
    EventQueue *q = &s->evq;
    if (q->cur_i == q->cur_n && q->now.n == 0 && q->count > 0) {
        while (q->cur_i == q->cur_n && q->now.n == 0 && q->count > 0) advance(q);
        for (int64_t i = 0; i < q->cur_n; i++) touch_event(s, &q->cur[i]); /* the bucket's, at once */
        if (q->cur_n > SORT_SMALL) { /* a small one's: as its events run */
            switch_route_bucket(s, q->cur, q->cur_n);
            for (int64_t i = 0; i < q->cur_n; i++) touch_sender(s, &q->cur[i]);
        }
    }
    const Event *e = ev_peek(q);
    if (!e || e->t > until) return 0;
    if (e == &q->cur[q->cur_i])
        *out = q->cur[q->cur_i++];
    else
        *out = heap_pop(&q->now);
    q->count--;
    return 1;
}

void evq_init(EventQueue *q) {
    q->head = malloc(CAL_BUCKETS * sizeof(int32_t));
    for (int64_t b = 0; b < CAL_BUCKETS; b++) q->head[b] = -1;
    q->bits = calloc(CAL_WORDS, sizeof(uint64_t));
    q->free = -1;
    q->now_end = CAL_WIDTH;
}

void evq_free(EventQueue *q) {
    free(q->head);
    free(q->bits);
    free(q->blocks);
    free(q->cur);
    free(q->tmp);
    free(q->now.ev);
    free(q->later.ev);
}
