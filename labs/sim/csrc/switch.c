/* A switch: ingress accounting per (port, PG) against the shared pool, PFC generation and
 * reception, forwarding (ECMP), egress schedulers (strict, DWRR) and ECN at dequeue (or
 * enqueue). Model: docs/physics.md sections 1-3, docs/simulator.md.
 */
#include "sim.h"

/* ---- ingress accounting and PFC generation (docs/physics.md 1.2, 2.1) ---- */

int64_t pg_threshold(const Sim *s, const Port *p, int pg) {
    const Profile *pr = &s->profiles[p->profile];
    if (pr->pg_static[pg] >= 0) return pr->pg_static[pg];
    const Node *n = &s->nodes[p->node];
    int64_t free_bytes = n->pool - n->pool_used;
    if (free_bytes <= 0) return 0;
    double t = pr->pg_alpha[pg] * (double)free_bytes; /* alpha may be infinite */
    return t >= (double)n->pool ? n->pool : (int64_t)t;
}

void send_pause(Sim *s, int port, int prio_mask, int quanta) {
    Port *P = &s->ports[port];
    if (!P->up || P->peer < 0) return;
    /* after the frame being sent (the headroom formula's MTU_R), its own serialisation and
     * the cable */
    ps_t t0 = P->busy_until > s->now ? P->busy_until : s->now;
    ps_t arrive = t0 + to_ps(PFC_FRAME_BYTES * P->ps_per_byte) + P->prop;
    for (int prio = 0; prio < NPRIO; prio++)
        if (prio_mask & (1 << prio)) {
            P->pfc_tx[prio]++;
            ev_push(s, arrive, EV_PFC, P->peer, prio, quanta);
        }
}

static int pg_mask(const Profile *pr, int pg) {
    int mask = 0;
    for (int tc = 0; tc < NPRIO; tc++)
        if (pr->tc_to_pg[tc] == pg && pr->lossless[tc]) mask |= 1 << tc;
    return mask;
}

static ps_t refresh_period(const Sim *s, const Port *P) {
    const Profile *pr = &s->profiles[P->profile];
    ps_t pause = to_ps(pr->pause_quanta * 512.0 * 1e12 / P->speed);
    ps_t r = to_ps((double)pause * pr->refresh_fraction);
    return r > 0 ? r : 1;
}

static void pg_xoff(Sim *s, int port, int pg) {
    Port *P = &s->ports[port];
    const Profile *pr = &s->profiles[P->profile];
    P->lane[pg].pg_paused = 1;
    P->lane[pg].pg_gen++;
    send_pause(s, port, pg_mask(pr, pg), pr->pause_quanta);
    ev_push(s, s->now + refresh_period(s, P), EV_PFC_REFRESH, port, pg, P->lane[pg].pg_gen);
}

/* XON once the headroom is empty and the shared occupancy is at or below the XON point,
 * max(xon, threshold - xon_offset), as SAI's XON_TH and XON_OFFSET_TH define it */
static int pg_may_resume(const Sim *s, const Port *P, int pg) {
    const Profile *pr = &s->profiles[P->profile];
    if (P->lane[pg].hdrm > 0) return 0;
    int64_t xon = pg_threshold(s, P, pg) - pr->pg_xon_offset[pg];
    if (xon < pr->pg_xon[pg]) xon = pr->pg_xon[pg];
    return P->lane[pg].shared <= xon;
}

static void pg_xon(Sim *s, int port, int pg) {
    Port *P = &s->ports[port];
    P->lane[pg].pg_paused = 0;
    P->lane[pg].pg_gen++;
    send_pause(s, port, pg_mask(&s->profiles[P->profile], pg), 0);
}

void on_pfc_refresh(Sim *s, int port, int pg, int gen) {
    Port *P = &s->ports[port];
    if (!P->lane[pg].pg_paused || P->lane[pg].pg_gen != gen) return;
    if (pg_may_resume(s, P, pg))
        pg_xon(s, port, pg);
    else
        pg_xoff(s, port, pg);
}

/* give back the buffer a switch packet holds, as an MMU does (HPCC's switch-mmu.cc,
 * RemoveFromIngressAdmission): from the PG's headroom first, then its shared bytes, then its
 * reserved bytes, whatever the packet was charged on arrival; may send XON. `port` is where it
 * leaves, on the switch it came in by: its profile's cells are the ingress port's (a switch's
 * cells, Profile.cell_bytes) and its node's pool the same, so that of the ingress port only
 * the PG's line is read */
void release_pkt(Sim *s, int pk, int port) {
    const Pkt *K = &s->pkts[pk];
    const Port *E = &s->ports[port];
    Lane *L = &s->ports[K->in_port].lane[K->pg];
    int64_t left = buffer_bytes(&s->profiles[E->profile], K->size);
    s->port_dirty[K->in_port] |= (uint16_t)(0x100u << K->pg);
    int64_t h = L->hdrm < left ? L->hdrm : left;
    L->hdrm -= h;
    left -= h;
    int64_t sh = L->shared < left ? L->shared : left;
    L->shared -= sh;
    s->nodes[E->node].pool_used -= sh;
    L->res -= left - sh;
    if (L->pg_paused) {
        const Port *I = &s->ports[K->in_port];
        if (I->up && pg_may_resume(s, I, K->pg)) pg_xon(s, K->in_port, K->pg);
    }
}

/* ---- PFC reception (egress side) ---- */

static void pfc_apply(Sim *s, int port, int prio, int quanta) {
    Port *P = &s->ports[port];
    ps_t until = s->now + to_ps(quanta * 512.0 * 1e12 / P->speed);
    if (s->now < P->lane[prio].pause_until) {
        P->lane[prio].pause_until = until; /* re-armed, or cut short by XON */
    } else if (until > s->now) {
        P->lane[prio].paused_total += P->lane[prio].pause_until - P->lane[prio].pause_from;
        P->lane[prio].pause_from = s->now;
        P->lane[prio].pause_until = until;
    }
    if (until > s->now)
        ev_push(s, until, EV_KICK, port, 0, 0);
    else
        try_send(s, port);
}

#define PFC_GEN_MASK 0xFFFFFF

/* A frame arrives (and is counted): an XON resumes at once; a pause acts once the MAC has
 * processed it, its profile's response time later (IEEE 802.3 Annex 31B.3.7 bounds the time
 * to stop, not to resume), unless an XON arrives meanwhile. A switch port acts only on the
 * priorities its pfc_enable lists (its profile's lossless ones; SONiC PORT_QOS_MAP, SAI
 * PRIORITY_FLOW_CONTROL): a frame naming another is counted and ignored. NICs act on all. */
void on_pfc(Sim *s, int port, int prio, int quanta) {
    Port *P = &s->ports[port];
    if (!P->up) return;
    P->pfc_rx[prio]++;
    P->lane[prio].last_pfc_rx = s->now;
    if (s->nodes[P->node].is_switch && !s->profiles[P->profile].lossless[prio]) return;
    ps_t resp = s->profiles[P->profile].pfc_resp;
    if (quanta > 0 && resp > 0) {
        ev_push(s, s->now + resp, EV_PFC_APPLY, port, prio | (P->lane[prio].pfc_gen & PFC_GEN_MASK) << 3, quanta);
        return;
    }
    if (quanta == 0) P->lane[prio].pfc_gen++; /* cancels the pauses still being processed */
    pfc_apply(s, port, prio, quanta);
}

void on_pfc_apply(Sim *s, int port, int packed, int quanta) {
    Port *P = &s->ports[port];
    int prio = packed & 7;
    if (P->up && packed >> 3 == (P->lane[prio].pfc_gen & PFC_GEN_MASK)) pfc_apply(s, port, prio, quanta);
}

/* ---- switch data path ---- */

/* node's route cell toward host h: its row's, or the host's own */
static uint32_t route_cell(const RouteTable *rt, int node, int h) {
    int32_t cell = rt->cell[(int64_t)node * rt->n_dest + rt->dest[h]];
    if (cell >= 0) return (uint32_t)cell;
    for (int32_t j = rt->own_start[h]; j < rt->own_start[h + 1]; j++)
        if (rt->own[2 * j] == node) return (uint32_t)rt->own[2 * j + 1];
    return 0; /* not reached: labs.sim.routing lists it */
}

static int route(const Sim *s, const Node *n, const Pkt *k) {
    uint32_t cell = route_cell(&s->rt, (int)(n - s->nodes), s->nodes[k->dst].host_idx);
    int lo = (int)(cell >> ROUTE_COUNT_BITS), cnt = (int)(cell & ((1u << ROUTE_COUNT_BITS) - 1));
    if (cnt == 0) return -1;
    int up = cnt;
    if (s->ports_down > 0) { /* ECMP over the members that are up */
        up = 0;
        for (int i = 0; i < cnt; i++) up += s->port_up[s->rt.nh[lo + i]];
        if (up == 0) return -1;
    }
    if (up == 1 && cnt == 1) return s->rt.nh[lo];
    uint64_t x = (uint64_t)k->hash ^ n->salt;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    int pick = (int)(up & (up - 1) ? x % (uint64_t)up : x & (uint64_t)(up - 1)); /* the same: no division for 2^k members */
    if (up == cnt) return s->rt.nh[lo + pick];
    for (int i = 0; i < cnt; i++)
        if (s->port_up[s->rt.nh[lo + i]] && pick-- == 0) return s->rt.nh[lo + i];
    return -1;
}

/* the routes of a bucket's arrivals at switches, taken when it becomes the current one (into
 * each Event.c, valid while Sim.routed): their chains of reads (packet, destination's row, route
 * cell, next hops) overlap across the bucket instead of each stalling one event ahead */
void switch_route_bucket(Sim *s, Event *ev, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        Event *e = &ev[i];
        if (e->type != EV_ARRIVE) continue;
        const Node *N = &s->nodes[s->ports[e->a].node];
        if (N->is_switch) e->c = route(s, N, &s->pkts[e->b]);
    }
    s->routed = 1;
}

/* what the arrival of packet pk at switch port `port` reads, fetched ahead of it: the ingress
 * PG's line and the egress port's first and queue lines; its route (`egress` if its bucket
 * took it, else taken now) is kept for it (Sim.ahead) */
void switch_prefetch(Sim *s, int port, int pk, int egress) {
    const Port *P = &s->ports[port];
    const Pkt *K = &s->pkts[pk];
    const Profile *pin = &s->profiles[P->profile];
    int tc = pin->dscp_to_tc[K->dscp];
    __builtin_prefetch(&P->lane[pin->tc_to_pg[tc]].res);
    int e = egress != ROUTE_UNTAKEN ? egress : route(s, &s->nodes[P->node], K);
    s->ahead = (Ahead){port, pk, e};
    if (e < 0) return;
    __builtin_prefetch(&s->ports[e]);
    __builtin_prefetch(&s->ports[e].lane[tc]);
}

static double red_prob(const Profile *pr, int q, int64_t bytes) {
    double b = (double)bytes;
    if (b <= pr->q_kmin[q]) return 0.0;
    if (b > pr->q_kmax[q]) return 1.0;
    return pr->q_pmax[q] * (b - pr->q_kmin[q]) / (pr->q_kmax[q] - pr->q_kmin[q]);
}

/* RED/ECN on an ECN-capable packet from queue q's instantaneous length */
static void mark_ecn(Sim *s, Port *P, const Profile *pr, int q, Pkt *K) {
    if ((K->flags & PK_ECT) && pr->q_ecn[q] && !(K->flags & PK_CE) &&
        rng_uniform(s) < red_prob(pr, q, P->lane[q].bytes)) {
        K->flags |= PK_CE;
        P->ecn_marked[K->prio]++;
    }
}

void switch_receive(Sim *s, int port, int pk) {
    Port *P = &s->ports[port];
    Node *N = &s->nodes[P->node];
    Pkt *K = &s->pkts[pk];
    const Profile *pin = &s->profiles[P->profile];
    int tc = pin->dscp_to_tc[K->dscp];
    K->prio = (uint8_t)tc;
    if (K->ttl == 0) return drop_pkt(s, pk, port, DR_TTL);
    K->ttl--;
    if (P->wd_state[tc] == WD_DROP) return drop_pkt(s, pk, port, DR_WATCHDOG);
    int e;
    if (pk == s->taken.pk && port == s->taken.port) {
        e = s->taken.egress;
        if (s->check_routes) s->routes_kept++, s->routes_stale += e != route(s, N, K);
    } else {
        e = route(s, N, K);
    }
    if (e < 0) return drop_pkt(s, pk, port, DR_NOROUTE);
    Port *E = &s->ports[e];
    __builtin_prefetch(&E->lane[tc]); /* its queue's line (queue tc on most profiles), with its first */
    const Profile *pe = &s->profiles[E->profile];
    int q = pe->tc_to_queue[tc];
    if (E->lane[q].tail >= 0) __builtin_prefetch(&s->pkts[E->lane[q].tail]); /* linked to it below */
    if (E->wd_state[tc] == WD_DROP) return drop_pkt(s, pk, port, DR_WATCHDOG);
    int pg = pin->tc_to_pg[tc];
    int lossless = pin->lossless[tc];
    if (!lossless) {
        if (pe->q_max[q] > 0 && E->lane[q].bytes + buffer_bytes(pe, K->size) > pe->q_max[q])
            return drop_pkt(s, pk, port, DR_LOSSY);
        if (pe->q_wred_drop[q] && !(K->flags & PK_ECT) && rng_uniform(s) < red_prob(pe, q, E->lane[q].bytes))
            return drop_pkt(s, pk, port, DR_LOSSY);
    }
    /* admission: the reserved bytes left, the rest to the shared pool within the PG's
     * threshold, else (lossless) all of it to the headroom, else a drop. A lossless PG not
     * yet paused and with no headroom in use takes the packet to shared (room in the pool
     * allowing) even when it takes the PG past its threshold, or finds it past a dynamic
     * threshold that fell since its last packet: XOFF is decided once this packet is in,
     * and the headroom is sized for what arrives after that decision (physics.md 1.3), so
     * the packet that crosses the threshold belongs before the pause, not to the headroom */
    int64_t thr = pg_threshold(s, P, pg), size = buffer_bytes(pin, K->size);
    int64_t res = pin->pg_reserved[pg] - P->lane[pg].res;
    res = res < 0 ? 0 : res > size ? size : res;
    int64_t rest = size - res;
    int before_xoff = lossless && !P->lane[pg].pg_paused && P->lane[pg].hdrm == 0 && N->pool_used + rest <= N->pool;
    s->port_dirty[port] |= (uint16_t)(0x100u << pg);
    if (rest == 0 || P->lane[pg].shared + rest <= thr || before_xoff) {
        P->lane[pg].res += res;
        P->lane[pg].shared += rest;
        N->pool_used += rest;
    } else if (lossless && P->lane[pg].hdrm + size <= pin->pg_headroom[pg]) {
        P->lane[pg].hdrm += size;
    } else {
        drop_pkt(s, pk, port, lossless ? DR_LOSSLESS : DR_LOSSY);
        if (lossless && !P->lane[pg].pg_paused) pg_xoff(s, port, pg);
        return;
    }
    K->in_port = port;
    K->pg = (uint32_t)pg;
    if (pe->ecn_enqueue) mark_ecn(s, E, pe, q, K); /* from the queue it joins */
    q_push(s, E, q, pk);
    if (lossless && !P->lane[pg].pg_paused && (P->lane[pg].hdrm > 0 || P->lane[pg].shared >= thr)) pg_xoff(s, port, pg);
    try_send(s, e);
}

/* strict-priority queues first (highest index first), then DWRR over the others */
static int pick_queue(Sim *s, Port *P, const Profile *pr) {
    for (unsigned strict = P->nonempty & pr->strict_mask; strict;) {
        int q = 31 - __builtin_clz(strict);
        if (queue_ready(s, P, q)) return q;
        strict &= ~(1u << q);
    }
    unsigned dwrr = P->nonempty & ~pr->strict_mask;
    for (int i = 0; dwrr && i < 2 * NPRIO + 1; i++) {
        int q = P->dwrr_cur;
        if (!((dwrr >> q) & 1)) { /* skip to the next queue holding packets */
            unsigned later = dwrr & ~((2u << q) - 1);
            P->dwrr_cur = later ? __builtin_ctz(later) : __builtin_ctz(dwrr);
            P->dwrr_fresh = 0;
            q = P->dwrr_cur;
        }
        if (queue_ready(s, P, q)) {
            if (!P->dwrr_fresh) {
                P->lane[q].deficit += pr->q_quantum[q];
                P->dwrr_fresh = 1;
            }
            if (P->lane[q].deficit >= s->pkts[P->lane[q].head].size) return q;
        }
        P->dwrr_cur = (q + 1) % NPRIO;
        P->dwrr_fresh = 0;
    }
    return -1;
}

int switch_dequeue(Sim *s, int port) {
    Port *P = &s->ports[port];
    const Profile *pr = &s->profiles[P->profile];
    int q = pick_queue(s, P, pr);
    if (q < 0) return -1;
    int pk = q_pop(s, P, q);
    Pkt *K = &s->pkts[pk];
    if (!pr->q_strict[q] && P->lane[q].count > 0) P->lane[q].deficit -= K->size;
    P->lane[q].last_deq = s->now;
    release_pkt(s, pk, port);
    if (!pr->ecn_enqueue) mark_ecn(s, P, pr, q, K); /* from the queue it leaves behind */
    return pk;
}

