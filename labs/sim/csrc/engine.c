/* The event loop and the data plane: links, switch ports (PG accounting, PFC, schedulers,
 * ECN at dequeue), host NICs (pacing, DCQCN reaction and notification points).
 * Model: physics.md sections 1-3; see docs/simulator.md.
 */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

void sim_log(Sim *s, int kind, int a, int b, int c) {
    if (s->n_log == s->cap_log) {
        s->cap_log = s->cap_log ? s->cap_log * 2 : 64;
        s->log = realloc(s->log, (size_t)s->cap_log * sizeof(LogEntry));
    }
    s->log[s->n_log++] = (LogEntry){s->now, kind, a, b, c};
}

/* ---- packet pool ---- */

static int pkt_alloc(Sim *s) {
    if (s->pkt_free < 0) {
        int32_t old = s->pkt_cap;
        s->pkt_cap = old ? old * 2 : 4096;
        s->pkts = realloc(s->pkts, (size_t)s->pkt_cap * sizeof(Pkt));
        for (int32_t i = old; i < s->pkt_cap; i++) s->pkts[i].next = i + 1 < s->pkt_cap ? i + 1 : -1;
        s->pkt_free = old;
    }
    int pk = s->pkt_free;
    s->pkt_free = s->pkts[pk].next;
    s->pkts[pk].next = -1;
    return pk;
}

static void pkt_free(Sim *s, int pk) {
    s->pkts[pk].next = s->pkt_free;
    s->pkt_free = pk;
}

static void q_push(Sim *s, Port *P, int qi, int pk) {
    Queue *q = &P->q[qi];
    P->nonempty |= (uint8_t)(1u << qi);
    s->pkts[pk].next = -1;
    if (q->count == 0) q->last_deq = s->now; /* a stall is timed from the first wait */
    if (q->tail >= 0)
        s->pkts[q->tail].next = pk;
    else
        q->head = pk;
    q->tail = pk;
    q->count++;
    q->bytes += s->pkts[pk].size;
}

int q_pop(Sim *s, Port *P, int qi) {
    Queue *q = &P->q[qi];
    int pk = q->head;
    q->head = s->pkts[pk].next;
    if (q->head < 0) {
        q->tail = -1;
        P->nonempty &= (uint8_t)~(1u << qi);
        P->deficit[qi] = 0; /* DWRR: an emptied queue keeps no credit */
    }
    q->count--;
    q->bytes -= s->pkts[pk].size;
    return pk;
}

/* ---- flows: completion and dependencies ---- */

static void flow_done(Sim *s, int f) {
    Flow *F = &s->flows[f];
    F->state = FL_DONE;
    F->t_done = s->now;
    s->open_flows--;
    for (int i = s->dep_start[f]; i < s->dep_start[f + 1]; i++) {
        Flow *D = &s->flows[s->dependents[i]];
        if (--D->n_deps == 0) {
            ps_t t = s->now + D->dep_delay;
            ev_push(s, t > D->start ? t : D->start, EV_FLOW_START, s->dependents[i], 0, 0);
        }
    }
}

static void flow_account(Sim *s, int f) {
    Flow *F = &s->flows[f];
    if (F->size >= 0 && F->state == FL_SENT && F->delivered + F->dropped >= F->size) flow_done(s, f);
}

static void port_remove_active(Port *P, int f) {
    for (int i = 0; i < P->n_active; i++)
        if (P->active[i] == f) {
            memmove(&P->active[i], &P->active[i + 1], (size_t)(P->n_active - i - 1) * sizeof(int32_t));
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
    if (counter == DR_LOSSLESS && !P->drop_logged[K->prio]) {
        P->drop_logged[K->prio] = 1;
        sim_log(s, LOG_LOSSLESS_DROP, port, K->prio, 0);
    }
    if (!(K->flags & PK_CNP)) {
        s->flows[K->flow].dropped += K->size;
        flow_account(s, K->flow);
    }
    pkt_free(s, pk);
}

/* ---- ingress accounting and PFC generation (physics 1.2, 2.1) ---- */

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
    P->pg_paused[pg] = 1;
    P->pg_gen[pg]++;
    send_pause(s, port, pg_mask(pr, pg), pr->pause_quanta);
    ev_push(s, s->now + refresh_period(s, P), EV_PFC_REFRESH, port, pg, P->pg_gen[pg]);
}

static int pg_may_resume(const Sim *s, const Port *P, int pg) {
    const Profile *pr = &s->profiles[P->profile];
    return P->pg_hdrm[pg] == 0 &&
           (P->pg_shared[pg] == 0 || P->pg_shared[pg] + pr->pg_xon_offset[pg] <= pg_threshold(s, P, pg));
}

static void pg_xon(Sim *s, int port, int pg) {
    Port *P = &s->ports[port];
    P->pg_paused[pg] = 0;
    P->pg_gen[pg]++;
    send_pause(s, port, pg_mask(&s->profiles[P->profile], pg), 0);
}

static void on_pfc_refresh(Sim *s, int port, int pg, int gen) {
    Port *P = &s->ports[port];
    if (!P->pg_paused[pg] || P->pg_gen[pg] != gen) return;
    if (pg_may_resume(s, P, pg))
        pg_xon(s, port, pg);
    else
        pg_xoff(s, port, pg);
}

/* give back the buffer a switch packet holds; may send XON */
void release_pkt(Sim *s, int pk) {
    Pkt *K = &s->pkts[pk];
    Port *I = &s->ports[K->in_port];
    switch (K->charge) {
    case CH_RESERVED:
        I->pg_res[K->pg] -= K->size;
        break;
    case CH_SHARED:
        I->pg_shared[K->pg] -= K->size;
        s->nodes[I->node].pool_used -= K->size;
        break;
    default:
        I->pg_hdrm[K->pg] -= K->size;
    }
    if (I->pg_paused[K->pg] && I->up && pg_may_resume(s, I, K->pg)) pg_xon(s, K->in_port, K->pg);
}

/* ---- PFC reception (egress side) ---- */

static void on_pfc(Sim *s, int port, int prio, int quanta) {
    Port *P = &s->ports[port];
    if (!P->up) return;
    P->pfc_rx[prio]++;
    P->last_pfc_rx[prio] = s->now;
    ps_t until = s->now + to_ps(quanta * 512.0 * 1e12 / P->speed);
    if (s->now < P->pause_until[prio]) {
        P->pause_until[prio] = until; /* re-armed, or cut short by XON */
    } else if (until > s->now) {
        P->paused_total[prio] += P->pause_until[prio] - P->pause_from[prio];
        P->pause_from[prio] = s->now;
        P->pause_until[prio] = until;
    }
    if (until > s->now)
        ev_push(s, until, EV_KICK, port, 0, 0);
    else
        try_send(s, port);
}

/* ---- switch data path ---- */

static int route(Sim *s, const Node *n, const Pkt *k) {
    int32_t h = s->nodes[k->dst].host_idx;
    int64_t row = (int64_t)(n - s->nodes) * s->n_hosts + h;
    int lo = s->rt_start[row], cnt = s->rt_start[row + 1] - lo;
    if (cnt == 0) return -1;
    int up = cnt;
    if (s->ports_down > 0) { /* ECMP over the members that are up */
        up = 0;
        for (int i = 0; i < cnt; i++) up += s->ports[s->rt_nh[lo + i]].up;
        if (up == 0) return -1;
    }
    if (up == 1 && cnt == 1) return s->rt_nh[lo];
    uint64_t x = (uint64_t)k->hash ^ n->salt;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    int pick = (int)(x % (uint64_t)up);
    if (up == cnt) return s->rt_nh[lo + pick];
    for (int i = 0; i < cnt; i++)
        if (s->ports[s->rt_nh[lo + i]].up && pick-- == 0) return s->rt_nh[lo + i];
    return -1;
}

static double red_prob(const Profile *pr, int q, int64_t bytes) {
    double b = (double)bytes;
    if (b <= pr->q_kmin[q]) return 0.0;
    if (b > pr->q_kmax[q]) return 1.0;
    return pr->q_pmax[q] * (b - pr->q_kmin[q]) / (pr->q_kmax[q] - pr->q_kmin[q]);
}

static void switch_receive(Sim *s, int port, int pk) {
    Port *P = &s->ports[port];
    Node *N = &s->nodes[P->node];
    Pkt *K = &s->pkts[pk];
    const Profile *pin = &s->profiles[P->profile];
    int tc = pin->dscp_to_tc[K->dscp];
    K->prio = (uint8_t)tc;
    if (K->ttl == 0) return drop_pkt(s, pk, port, DR_TTL);
    K->ttl--;
    if (P->wd_state[tc] == WD_DROP) return drop_pkt(s, pk, port, DR_WATCHDOG);
    int e = route(s, N, K);
    if (e < 0) return drop_pkt(s, pk, port, DR_NOROUTE);
    Port *E = &s->ports[e];
    const Profile *pe = &s->profiles[E->profile];
    int q = pe->tc_to_queue[tc];
    if (E->wd_state[tc] == WD_DROP) return drop_pkt(s, pk, port, DR_WATCHDOG);
    int pg = pin->tc_to_pg[tc];
    int lossless = pin->lossless[tc];
    if (!lossless) {
        if (pe->q_max[q] > 0 && E->q[q].bytes + K->size > pe->q_max[q]) return drop_pkt(s, pk, port, DR_LOSSY);
        if (pe->q_wred_drop[q] && !(K->flags & PK_ECT) && rng_uniform(s) < red_prob(pe, q, E->q[q].bytes))
            return drop_pkt(s, pk, port, DR_LOSSY);
    }
    int64_t thr = pg_threshold(s, P, pg);
    if (P->pg_res[pg] + K->size <= pin->pg_reserved[pg]) {
        K->charge = CH_RESERVED;
        P->pg_res[pg] += K->size;
    } else if (P->pg_shared[pg] + K->size <= thr) {
        K->charge = CH_SHARED;
        P->pg_shared[pg] += K->size;
        N->pool_used += K->size;
    } else if (lossless && P->pg_hdrm[pg] + K->size <= pin->pg_headroom[pg]) {
        K->charge = CH_HEADROOM;
        P->pg_hdrm[pg] += K->size;
    } else {
        drop_pkt(s, pk, port, lossless ? DR_LOSSLESS : DR_LOSSY);
        if (lossless && !P->pg_paused[pg]) pg_xoff(s, port, pg);
        return;
    }
    K->in_port = port;
    K->pg = (uint8_t)pg;
    q_push(s, E, q, pk);
    if (lossless && !P->pg_paused[pg] && (P->pg_hdrm[pg] > 0 || P->pg_shared[pg] >= thr)) pg_xoff(s, port, pg);
    try_send(s, e);
}

static int queue_ready(const Sim *s, const Port *P, int q) {
    return P->q[q].count > 0 && !port_paused(s, P, s->pkts[P->q[q].head].prio);
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
                P->deficit[q] += pr->q_quantum[q];
                P->dwrr_fresh = 1;
            }
            if (P->deficit[q] >= s->pkts[P->q[q].head].size) return q;
        }
        P->dwrr_cur = (q + 1) % NPRIO;
        P->dwrr_fresh = 0;
    }
    return -1;
}

static int switch_dequeue(Sim *s, int port) {
    Port *P = &s->ports[port];
    const Profile *pr = &s->profiles[P->profile];
    int q = pick_queue(s, P, pr);
    if (q < 0) return -1;
    int pk = q_pop(s, P, q);
    Pkt *K = &s->pkts[pk];
    if (!pr->q_strict[q] && P->q[q].count > 0) P->deficit[q] -= K->size;
    P->q[q].last_deq = s->now;
    release_pkt(s, pk);
    if ((K->flags & PK_ECT) && pr->q_ecn[q] && !(K->flags & PK_CE) &&
        rng_uniform(s) < red_prob(pr, q, P->q[q].bytes)) {
        K->flags |= PK_CE;
        P->ecn_marked[K->prio]++;
    }
    return pk;
}

/* ---- host NIC ---- */

static void dcqcn_increase(Sim *s, Flow *F) {
    const Dcqcn *d = &s->dcq;
    int hi = F->t_stage > F->b_stage ? F->t_stage : F->b_stage;
    int lo = F->t_stage < F->b_stage ? F->t_stage : F->b_stage;
    if (hi > d->f) {
        F->rt += lo > d->f ? (lo - d->f) * d->r_hai : d->r_ai;
        if (F->rt > F->line) F->rt = F->line;
    }
    F->rc = (F->rt + F->rc) / 2;
}

static void on_rate_timer(Sim *s, int f, int gen) {
    Flow *F = &s->flows[f];
    if (F->state != FL_SENDING || F->timer_gen != gen) return;
    F->t_stage++;
    dcqcn_increase(s, F);
    ev_push(s, s->now + s->dcq.timer, EV_RATE_TIMER, f, gen, 0);
}

/* alpha's periodic update, done lazily: at each alpha_period boundary since the flow started,
 * alpha <- (1-g) alpha unless a CNP arrived in the period that ended there */
static void alpha_catch_up(Sim *s, Flow *F) {
    int64_t k = (s->now - F->t_start) / s->dcq.alpha_period;
    if (k <= F->alpha_periods) return;
    int64_t decays = k - F->alpha_periods - F->cnp_seen;
    if (decays > 0) F->alpha *= pow(1 - s->dcq.g, (double)decays);
    F->alpha_periods = k;
    F->cnp_seen = 0;
}

/* bring what is reported up to date at the end of a run */
void settle_flows(Sim *s) {
    for (int f = 0; f < s->n_flows; f++)
        if (s->flows[f].dcqcn && s->flows[f].state == FL_SENDING) alpha_catch_up(s, &s->flows[f]);
}

static void on_cnp(Sim *s, int f) {
    Flow *F = &s->flows[f];
    F->cnps++;
    if (!F->dcqcn || F->state != FL_SENDING) return;
    const Dcqcn *d = &s->dcq;
    alpha_catch_up(s, F);
    if (!d->clamp_after_increase || F->t_stage > 0 || F->b_stage > 0) F->rt = F->rc;
    F->rc *= 1 - F->alpha / 2;
    if (F->rc < d->min_rate) F->rc = d->min_rate;
    F->alpha = (1 - d->g) * F->alpha + d->g;
    F->cnp_seen = 1;
    F->t_stage = F->b_stage = 0;
    F->b_bytes = 0;
    ev_push(s, s->now + d->timer, EV_RATE_TIMER, f, ++F->timer_gen, 0);
}

static void on_flow_start(Sim *s, int f) {
    Flow *F = &s->flows[f];
    if (F->state != FL_WAITING) return;
    Port *P = &s->ports[F->port];
    F->state = FL_SENDING;
    F->t_start = s->now;
    F->next_time = s->now;
    F->line = F->rate > 0 && F->rate < P->speed ? F->rate : P->speed;
    F->rc = F->rt = F->line;
    F->alpha = s->dcq.initial_alpha;
    if (F->dcqcn) F->np_phase = to_ps(rng_uniform(s) * (double)s->dcq.cnp_interval);
    if (F->size == 0) {
        F->state = FL_SENT;
        flow_account(s, f);
        return;
    }
    if (P->n_active == P->cap_active) {
        P->cap_active = P->cap_active ? P->cap_active * 2 : 4;
        P->active = realloc(P->active, (size_t)P->cap_active * sizeof(int32_t));
    }
    P->active[P->n_active++] = f;
    try_send(s, F->port);
}

static void flow_stop_sending(Sim *s, Port *P, int f) {
    Flow *F = &s->flows[f];
    if (F->dcqcn) alpha_catch_up(s, F);
    F->state = FL_SENT;
    port_remove_active(P, f);
    if (F->size < 0)
        flow_done(s, f);
    else if (F->sent < F->size)
        F->size = F->sent; /* stopped early: done when what was sent is accounted */
}

static int nic_make_packet(Sim *s, Port *P, int f) {
    Flow *F = &s->flows[f];
    int64_t left = F->size < 0 ? F->pkt_size : F->size - F->sent;
    int size = left < F->pkt_size ? (int)left : F->pkt_size;
    int pk = pkt_alloc(s);
    Pkt *K = &s->pkts[pk];
    K->flow = f;
    K->size = size;
    K->dst = F->dst;
    K->in_port = -1;
    K->hash = F->hash;
    K->dscp = F->dscp;
    K->prio = F->prio;
    K->ttl = (uint8_t)F->ttl;
    K->flags = F->ect ? PK_ECT : 0;
    F->sent += size;
    double rate = F->dcqcn ? F->rc : F->line;
    F->next_time = s->now + to_ps(size * 8e12 / rate);
    if (F->dcqcn && (F->b_bytes += size) >= s->dcq.byte_counter) {
        F->b_bytes -= s->dcq.byte_counter;
        F->b_stage++;
        dcqcn_increase(s, F);
    }
    if ((F->size >= 0 && F->sent >= F->size) || F->next_time >= F->stop) flow_stop_sending(s, P, f);
    return pk;
}

static int nic_dequeue(Sim *s, int port) {
    Port *P = &s->ports[port];
    for (unsigned ready = P->nonempty; ready;) {
        int q = 31 - __builtin_clz(ready);
        if (queue_ready(s, P, q)) return q_pop(s, P, q);
        ready &= ~(1u << q);
    }
    ps_t wake = T_INF;
    for (int i = 0; i < P->n_active; i++) {
        int idx = (P->rr + i) % P->n_active;
        Flow *F = &s->flows[P->active[idx]];
        if (port_paused(s, P, F->prio)) continue;
        if (F->next_time <= s->now) {
            P->rr = idx + 1;
            int pk = nic_make_packet(s, P, P->active[idx]);
            if (P->rr >= P->n_active) P->rr = 0;
            return pk;
        }
        if (F->next_time < wake) wake = F->next_time;
    }
    if (wake < T_INF && (P->next_kick <= s->now || wake < P->next_kick)) {
        P->next_kick = wake;
        ev_push(s, wake, EV_KICK, port, 0, 0);
    }
    return -1;
}

static void send_cnp(Sim *s, int port, int f) {
    Flow *F = &s->flows[f];
    F->last_cnp = s->now;
    int c = pkt_alloc(s);
    Pkt *C = &s->pkts[c];
    C->flow = f;
    C->size = CNP_BYTES;
    C->dst = F->src;
    C->in_port = -1;
    C->hash = F->hash ^ 0x9e3779b9u;
    C->dscp = (uint8_t)s->dcq.cnp_dscp;
    C->prio = (uint8_t)s->dcq.cnp_prio;
    C->ttl = 64;
    C->flags = PK_CNP;
    q_push(s, &s->ports[port], s->dcq.cnp_prio, c);
    try_send(s, port);
}

static void host_receive(Sim *s, int port, int pk) {
    Pkt *K = &s->pkts[pk];
    int f = K->flow;
    Flow *F = &s->flows[f];
    if (K->flags & PK_CNP) {
        on_cnp(s, f);
        pkt_free(s, pk);
        return;
    }
    if (K->dst != s->ports[port].node) return drop_pkt(s, pk, port, DR_NOROUTE);
    F->delivered += K->size;
    int ce = (K->flags & PK_CE) != 0;
    pkt_free(s, pk);
    F->ce += ce;
    if (!F->dcqcn || !ce) {
    } else if (s->dcq.np_window) {
        /* one CNP per cnp_interval window (each flow's windows at a random phase), sent at
         * the first marked packet of the window */
        int64_t w = (s->now + F->np_phase) / s->dcq.cnp_interval;
        if (w != F->np_last_window) {
            F->np_last_window = w;
            send_cnp(s, port, f);
        }
    } else if (F->last_cnp < 0 || s->now - F->last_cnp >= s->dcq.cnp_interval) {
        send_cnp(s, port, f);
    }
    flow_account(s, f);
}

/* ---- ports ---- */

/* start the next frame if the port is idle; a port wakes up at the end of a frame (EV_TX_DONE)
 * only when it may have more to send, so a packet that finds its port idle costs no event */
void try_send(Sim *s, int port) {
    Port *P = &s->ports[port];
    if (!P->up) return;
    if (P->busy_until > s->now) {
        if (!P->wake) {
            P->wake = 1;
            ev_push(s, P->busy_until, EV_TX_DONE, port, 0, 0);
        }
        return;
    }
    int pk = s->nodes[P->node].is_switch ? switch_dequeue(s, port) : nic_dequeue(s, port);
    if (pk < 0) return;
    Pkt *K = &s->pkts[pk];
    ps_t ser = to_ps(K->size * P->ps_per_byte);
    P->busy_until = s->now + ser;
    P->tx_bytes[K->prio] += K->size;
    P->tx_pkts[K->prio]++;
    ev_push(s, s->now + ser + P->prop, EV_ARRIVE, P->peer, pk, 0);
    if (!P->wake && (P->nonempty || P->n_active > 0)) {
        P->wake = 1;
        ev_push(s, P->busy_until, EV_TX_DONE, port, 0, 0);
    }
}

/* drop every packet of one egress queue, giving back the buffer they hold */
void flush_queue(Sim *s, int port, int q, int counter) {
    Port *P = &s->ports[port];
    int sw = s->nodes[P->node].is_switch;
    while (P->q[q].count > 0) {
        int pk = q_pop(s, P, q);
        if (sw) release_pkt(s, pk);
        drop_pkt(s, pk, port, counter);
    }
}

static void on_link(Sim *s, int link, int up) {
    int ends[2] = {s->link_ports[2 * link], s->link_ports[2 * link + 1]};
    sim_log(s, up ? LOG_LINK_UP : LOG_LINK_DOWN, link, 0, 0);
    for (int i = 0; i < 2; i++) {
        Port *P = &s->ports[ends[i]];
        if (P->up != up) s->ports_down += up ? -1 : 1;
        P->up = (uint8_t)up;
        if (up) continue;
        for (int prio = 0; prio < NPRIO; prio++) {
            if (P->pause_until[prio] > s->now) P->pause_until[prio] = s->now;
            P->pg_paused[prio] = 0;
            P->pg_gen[prio]++;
        }
    }
    for (int i = 0; i < 2; i++) {
        if (up)
            try_send(s, ends[i]);
        else
            for (int q = 0; q < NPRIO; q++) flush_queue(s, ends[i], q, DR_LINK);
    }
}

static void on_arrive(Sim *s, int port, int pk) {
    Port *P = &s->ports[port];
    if (!P->up) return drop_pkt(s, pk, port, DR_LINK);
    if (!(s->pkts[pk].flags & PK_CNP)) s->n_hops++;
    if (s->nodes[P->node].is_switch)
        switch_receive(s, port, pk);
    else
        host_receive(s, port, pk);
}

/* run events up to time `until` (inclusive); returns 1 when the run is over */
int sim_step_all(Sim *s, ps_t until) {
    Event e;
    while (!s->stopped) {
        if (!ev_next(s, until, &e)) return s->evq.count == 0;
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
        }
        if (s->stop_when_done && s->open_flows == 0) s->stopped = 1;
    }
    return 1;
}
