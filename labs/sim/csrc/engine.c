/* The event loop, packets, queues, flows' completion and ports: links, transmission,
 * arrivals. Switch logic is in switch.c, NIC logic in nic.c; see docs/simulator.md.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- random numbers: xoshiro256** seeded by splitmix64 ---- */

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

double rng_uniform(Sim *s) {
    uint64_t *r = s->rng;
    uint64_t result = rotl(r[1] * 5, 7) * 9, t = r[1] << 17;
    r[2] ^= r[0];
    r[3] ^= r[1];
    r[1] ^= r[2];
    r[0] ^= r[3];
    r[2] ^= t;
    r[3] = rotl(r[3], 45);
    return (double)(result >> 11) * 0x1.0p-53;
}

/* ---- log of notable events ---- */

void sim_log_at(Sim *s, ps_t t, int kind, int a, int b, int c) {
    if (s->n_log == s->cap_log) {
        s->cap_log = s->cap_log ? s->cap_log * 2 : 64;
        s->log = realloc(s->log, (size_t)s->cap_log * sizeof(LogEntry));
    }
    s->log[s->n_log++] = (LogEntry){t, kind, a, b, c};
}

void sim_log(Sim *s, int kind, int a, int b, int c) { sim_log_at(s, s->now, kind, a, b, c); }

/* ---- large arrays on huge pages ---- */

#define HUGE_PAGE ((size_t)2 << 20)

/* ask for huge pages (2 MB) where the kernel gives them on request (transparent huge pages in
 * madvise mode): the large arrays are read at random, and on 4 KB pages most of those reads
 * missed the TLB too (a page walk, costlier still in a virtual machine) */
static void want_huge(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    if (n < 2 * HUGE_PAGE) return;
    uintptr_t start = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, end = ((uintptr_t)p + n) & ~(uintptr_t)4095;
    madvise((void *)start, end - start, MADV_HUGEPAGE); /* a hint: without huge pages, as before */
#else
    (void)p, (void)n;
#endif
}

/* a zeroed array of n items of `size` bytes, 64-byte aligned, on huge pages when it is large */
void *huge_calloc(size_t n, size_t size) {
    size_t bytes = n * size > 0 ? n * size : 1;
    size_t align = bytes >= 2 * HUGE_PAGE ? HUGE_PAGE : 64;
    bytes = (bytes + align - 1) / align * align;
    void *p = aligned_alloc(align, bytes);
    want_huge(p, bytes);
    memset(p, 0, bytes);
    return p;
}

/* an array of `bytes` grown from p (its first `used` bytes kept, the rest zeroed; p freed), on
 * huge pages when it is large: asked for before its pages are first touched, which realloc's
 * copy would do first (the kernel then backs them with 4 KB pages) */
void *huge_grow(void *p, size_t used, size_t bytes) {
    void *grown = huge_calloc(bytes, 1);
    if (used) memcpy(grown, p, used);
    free(p);
    return grown;
}

/* ---- pools: items in one array, the free ones linked by an int32 index ---- */

/* an empty free list: double the pool (first `initial` items) and link its new items (their
 * link an int32 at byte `link` of each), the first free one in *free; returns the moved pool */
void *pool_grow(void *items, size_t size, size_t link, int32_t *cap, int32_t *free, int32_t initial) {
    int32_t old = *cap;
    *cap = old ? old * 2 : initial;
    items = huge_grow(items, (size_t)old * size, (size_t)*cap * size);
    for (int32_t i = old; i < *cap; i++) {
        int32_t next = i + 1 < *cap ? i + 1 : -1;
        memcpy((char *)items + (size_t)i * size + link, &next, sizeof next);
    }
    *free = old;
    return items;
}

int pkt_alloc(Sim *s) {
    if (s->pkt_free < 0) s->pkts = pool_grow(s->pkts, sizeof(Pkt), offsetof(Pkt, next), &s->pkt_cap, &s->pkt_free, 4096);
    int pk = s->pkt_free;
    s->pkt_free = s->pkts[pk].next;
    s->pkts[pk].next = -1;
    return pk;
}

void pkt_free(Sim *s, int pk) {
    s->pkts[pk].next = s->pkt_free;
    s->pkt_free = pk;
}

void q_push(Sim *s, Port *P, int qi, int pk) {
    Lane *q = &P->lane[qi];
    s->port_dirty[P - s->ports] |= (uint16_t)(1u << qi);
    P->nonempty |= (uint8_t)(1u << qi);
    s->pkts[pk].next = -1;
    if (q->count == 0) q->last_deq = s->now; /* a stall is timed from the first wait */
    if (q->tail >= 0) {
        s->pkts[q->tail].next = pk;
        s->pkts[q->tail].next_prio = s->pkts[pk].prio;
    } else {
        q->head = pk;
        q->head_prio = s->pkts[pk].prio;
    }
    q->tail = pk;
    q->count++;
    q->bytes += buffer_bytes(&s->profiles[P->profile], s->pkts[pk].size);
}

int q_pop(Sim *s, Port *P, int qi) {
    Lane *q = &P->lane[qi];
    int pk = q->head;
    s->port_dirty[P - s->ports] |= (uint16_t)(1u << qi);
    q->head = s->pkts[pk].next;
    if (q->head >= 0) { /* the new head is read at the next dequeue: fetched meanwhile */
        q->head_prio = s->pkts[pk].next_prio;
        __builtin_prefetch(&s->pkts[q->head]);
    }
    if (q->head < 0) {
        q->tail = -1;
        P->nonempty &= (uint8_t)~(1u << qi);
        P->lane[qi].deficit = 0; /* DWRR: an emptied queue keeps no credit */
    }
    q->count--;
    q->bytes -= buffer_bytes(&s->profiles[P->profile], s->pkts[pk].size);
    return pk;
}

/* ---- flows: completion and dependencies ---- */

/* a cleared run state from the pool (the pool may move: hold no Run pointer across this) */
int run_alloc(Sim *s) {
    if (s->run_free < 0) s->runs = pool_grow(s->runs, sizeof(Run), offsetof(Run, next_free), &s->cap_runs, &s->run_free, 1024);
    int r = s->run_free;
    s->run_free = s->runs[r].next_free;
    memset(&s->runs[r], 0, sizeof(Run));
    if (++s->runs_used > s->runs_peak) s->runs_peak = s->runs_used;
    return r;
}

/* done: an open flow gives its run state back (no packet of it is left: what it sent was
 * delivered or dropped); a reliable one keeps it (see Run) */
void flow_done(Sim *s, int f) {
    Flow *F = &s->flows[f];
    int32_t timer_gen = F->run >= 0 ? s->runs[F->run].timer_gen : 0;
    F->state = FL_DONE;
    F->t_done = s->now;
    s->open_flows--;
    if (F->run >= 0 && !F->transport && f >= s->keep_runs) {
        s->runs[F->run].next_free = s->run_free;
        s->run_free = F->run;
        F->run = -1;
        s->runs_used--;
    }
    for (int i = s->dep_start[f]; i < s->dep_start[f + 1]; i++) dep_met(s, s->dependents[i]);
    if (s->n_colls) coll_flow_done(s, f, timer_gen);
}

/* one of what flow d waits for is done: it starts when it waits for nothing more */
void dep_met(Sim *s, int d) {
    Flow *D = &s->flows[d];
    if (--D->n_deps == 0) {
        if (s->n_colls && coll_held(s, d)) return;
        ps_t t = s->now + D->dep_delay;
        ev_push(s, t > D->start ? t : D->start, EV_FLOW_START, d, 0, 0);
    }
}

void flow_account(Sim *s, int f) {
    Flow *F = &s->flows[f];
    if (F->size < 0 || F->state != FL_SENT) return;
    /* reliable: once the sender holds the ACK of its last byte (a work completion) */
    if (F->transport ? s->rel[F->rel].snd_una >= F->size : F->delivered + F->dropped >= F->size) flow_done(s, f);
}

void port_remove_active(Port *P, int f) {
    for (int i = 0; i < P->n_active; i++)
        if (P->active[i].flow == f) {
            memmove(&P->active[i], &P->active[i + 1], (size_t)(P->n_active - i - 1) * sizeof(Active));
            P->n_active--;
            if (P->rr > i) P->rr--;
            return;
        }
}

/* a drop of a packet held by no buffer (the caller has released any accounting) */
void drop_pkt(Sim *s, int pk, int port, int counter) {
    Pkt *K = &s->pkts[pk];
    Port *P = &s->ports[port];
    P->drops[counter][K->prio]++;
    if (counter == DR_LOSSLESS && !P->lane[K->prio].drop_logged) {
        P->lane[K->prio].drop_logged = 1;
        sim_log(s, LOG_LOSSLESS_DROP, port, K->prio, 0);
    }
    if (!(K->flags & PK_CTRL)) {
        if (s->flows[K->flow].t_drop < 0) s->flows[K->flow].t_drop = s->now; /* started: see Flow */
        s->flows[K->flow].dropped += K->size - s->hdr_bytes;
        flow_account(s, K->flow);
    }
    pkt_free(s, pk);
}

/* ---- ports ---- */

/* start the next frame if the port is idle; a port wakes up at the end of a frame (EV_TX_DONE)
 * only when it may have more to send, so a packet that finds its port idle costs no event */
void try_send(Sim *s, int port) {
    Port *P = &s->ports[port];
    if (!P->up) return;
    int sw = s->nodes[P->node].is_switch;
    if (P->busy_until > s->now) {
        if (!P->wake) {
            P->wake = 1;
            ev_push(s, P->busy_until, EV_TX_DONE, port, !sw, 0);
        }
        return;
    }
    int pk = sw ? switch_dequeue(s, port) : nic_dequeue(s, port);
    if (pk < 0) return;
    Pkt *K = &s->pkts[pk];
    ps_t ser = to_ps((K->size + s->gap_bytes) * P->ps_per_byte);
    P->busy_until = s->now + ser;
    P->lane[K->prio].tx_bytes += K->size;
    P->lane[K->prio].tx_pkts++;
    ev_push(s, s->now + ser + P->prop, EV_ARRIVE, P->peer, pk, ROUTE_UNTAKEN);
    if (!P->wake && (P->nonempty || (!sw && P->n_active > 0))) { /* a switch's n_active: 0, not read */
        P->wake = 1;
        ev_push(s, P->busy_until, EV_TX_DONE, port, !sw, 0);
    }
}

/* drop every packet of one egress queue, giving back the buffer they hold */
void flush_queue(Sim *s, int port, int q, int counter) {
    Port *P = &s->ports[port];
    int sw = s->nodes[P->node].is_switch;
    while (P->lane[q].count > 0) {
        int pk = q_pop(s, P, q);
        if (sw) release_pkt(s, pk, port);
        drop_pkt(s, pk, port, counter);
    }
}

/* the port itself when up, else another up port of the same host (a bond's member), else it */
int host_up_port(const Sim *s, int port) {
    if (s->ports[port].up) return port;
    for (int o = 0; o < s->n_ports; o++)
        if (s->ports[o].node == s->ports[port].node && s->ports[o].up) return o;
    return port;
}

/* a host NIC port went down: its flows continue on another up port of the host (bonding) */
static void nic_failover(Sim *s, int port) {
    Port *P = &s->ports[port];
    int o = host_up_port(s, port);
    if (o == port || P->n_active == 0) return;
    for (int i = 0; i < P->n_active; i++) {
        s->flows[P->active[i].flow].port = o;
        port_add_active(s, &s->ports[o], P->active[i].flow);
    }
    P->n_active = P->rr = 0;
    try_send(s, o);
}

static void on_rate(Sim *s, int link, double speed) {
    for (int i = 0; i < 2; i++) {
        Port *P = &s->ports[s->link_ports[2 * link + i]];
        P->speed = speed;
        P->ps_per_byte = 8e12 / speed;
    }
}

/* routes taken before their arrival are dropped: the table or a port's state changed */
static void drop_routes_ahead(Sim *s) {
    s->ahead.pk = -1;
    s->routed = 0;
}

static void on_link(Sim *s, int link, int up) {
    int ends[2] = {s->link_ports[2 * link], s->link_ports[2 * link + 1]};
    sim_log(s, up ? LOG_LINK_UP : LOG_LINK_DOWN, link, 0, 0);
    for (int i = 0; i < 2; i++) {
        Port *P = &s->ports[ends[i]];
        if (P->up != up) s->ports_down += up ? -1 : 1;
        P->up = s->port_up[ends[i]] = (uint8_t)up;
        drop_routes_ahead(s);
        if (up) continue;
        for (int prio = 0; prio < NPRIO; prio++) {
            if (P->lane[prio].pause_until > s->now) P->lane[prio].pause_until = s->now;
            P->lane[prio].pg_paused = 0;
            P->lane[prio].pg_gen++;
        }
    }
    for (int i = 0; i < 2; i++) {
        if (up)
            try_send(s, ends[i]);
        else {
            for (int q = 0; q < NPRIO; q++) flush_queue(s, ends[i], q, DR_LINK);
            if (!s->nodes[s->ports[ends[i]].node].is_switch) nic_failover(s, ends[i]);
        }
    }
}

/* the loss fault of a port takes this data frame */
static int lost(Sim *s, Port *P, const Pkt *K) {
    if ((K->flags & PK_CTRL) || s->now < P->loss_from) return 0;
    if (P->loss_n > 0) {
        P->loss_n--;
        return 1;
    }
    return P->loss_p > 0 && rng_uniform(s) < P->loss_p;
}

static void on_arrive(Sim *s, int port, int pk) {
    Port *P = &s->ports[port];
    if (!P->up || (P->loss_until > s->now && lost(s, P, &s->pkts[pk]))) return drop_pkt(s, pk, port, DR_LINK);
    if (!(s->pkts[pk].flags & PK_CTRL)) s->n_hops++;
    if (s->nodes[P->node].is_switch)
        switch_receive(s, port, pk);
    else
        host_receive(s, port, pk);
}

/* what the next event's arrival reads beyond its port and packet (fetched with its bucket:
 * eventq.c), fetched while this one runs: at a switch its ingress PG and egress port (the
 * route taken is kept for it: Sim.ahead), at a host the packet's flow (a hint: the next event
 * may yet be another) */
static inline void prefetch_next(Sim *s) {
    const Event *n = ev_peek(&s->evq);
    if (!n) return;
    const Port *P = &s->ports[n->a];
    if (n->type == EV_TX_DONE && !s->nodes[P->node].is_switch) { /* its round robin's entries */
        for (int i = 0; i < P->n_active; i += 64 / sizeof(Active)) __builtin_prefetch(&P->active[i]);
        return;
    }
    if (n->type == EV_TX_DONE) { /* a switch port: its queues holding packets */
        for (unsigned q = P->nonempty; q; q &= q - 1) __builtin_prefetch(&P->lane[__builtin_ctz(q)]);
        return;
    }
    if (n->type != EV_ARRIVE) return;
    if (s->nodes[P->node].is_switch) {
        switch_prefetch(s, n->a, n->b, s->routed ? n->c : ROUTE_UNTAKEN);
    } else {
        const char *F = (const char *)&s->flows[s->pkts[n->b].flow];
        __builtin_prefetch(F);
        __builtin_prefetch(F + sizeof(Flow) - 1);
    }
}

/* run events up to time `until` (inclusive); returns 1 when the run is over */
int sim_step_all(Sim *s, ps_t until) {
    Event e;
    drop_routes_ahead(s); /* the API may have changed what routes depend on between steps */
    while (!s->stopped) {
        if (!ev_next(s, until, &e)) return s->evq.count == 0;
        s->taken = s->ahead; /* taken for this event if it was the one peeked at */
        if (s->routed && e.type == EV_ARRIVE && e.c != ROUTE_UNTAKEN) s->taken = (Ahead){e.a, e.b, e.c};
        s->ahead.pk = -1;
        prefetch_next(s);
        s->now = e.t;
        s->n_events++;
        switch (e.type) {
        case EV_ARRIVE:
            on_arrive(s, e.a, e.b);
            break;
        case EV_TX_DONE:
            s->ports[e.a].wake = 0;
            try_send(s, e.a);
            break;
        case EV_KICK:
            if (s->ports[e.a].next_kick == s->now) s->ports[e.a].next_kick = T_INF;
            try_send(s, e.a);
            break;
        case EV_PFC:
            on_pfc(s, e.a, e.b, e.c);
            break;
        case EV_PFC_APPLY:
            on_pfc_apply(s, e.a, e.b, e.c);
            break;
        case EV_PFC_REFRESH:
            on_pfc_refresh(s, e.a, e.b, e.c);
            break;
        case EV_FLOW_START:
            on_flow_start(s, e.a);
            break;
        case EV_RATE_TIMER:
            on_rate_timer(s, e.a, e.b);
            break;
        case EV_LINK:
            on_link(s, e.a, e.b);
            break;
        case EV_STORM:
            on_storm(s, e.a);
            break;
        case EV_SAMPLE:
            on_sample(s);
            break;
        case EV_CHECK:
            on_check(s);
            break;
        case EV_ROUTES:
            s->rt = s->tables[e.a];
            drop_routes_ahead(s);
            break;
        case EV_RATE:
            on_rate(s, e.a, s->rates[e.b]);
            break;
        case EV_RTO:
            on_rto(s, e.a);
            break;
        case EV_COLL:
            on_coll(s, e.a);
            break;
        }
        if (s->stop_when_done && s->open_flows == 0) s->stopped = 1;
    }
    return 1;
}
