/* A host NIC: flows (QPs) paced at their rate, the DCQCN reaction point (rate cuts and
 * increases) and notification point (CNPs), delivery; reliable transports in transport.c.
 * Model: docs/physics.md section 3.2.
 */
#include "sim.h"

#include <math.h>
#include <stdlib.h>

/* ---- DCQCN reaction point ---- */

/* one rate-increase event (timer or byte counter): the first F events after a CNP are fast
 * recovery, later ones additive increase, hyper increase once both counters passed F (the
 * fluid model's (1-p)^(F B) counts F fast-recovery events) */
static void dcqcn_increase(const Dcqcn *d, Run *R) {
    int hi = R->t_stage > R->b_stage ? R->t_stage : R->b_stage;
    int lo = R->t_stage < R->b_stage ? R->t_stage : R->b_stage;
    if (hi > d->f) {
        R->rt += lo > d->f ? (lo - d->f) * d->r_hai : d->r_ai;
        if (R->rt > R->line) R->rt = R->line;
    }
    R->rc = (R->rt + R->rc) / 2;
}

void on_rate_timer(Sim *s, int f, int gen) {
    Flow *F = &s->flows[f];
    if (F->state != FL_SENDING) return;
    Run *R = flow_run(s, F);
    if (R->timer_gen != gen) return;
    R->t_stage++;
    const Dcqcn *d = flow_rp(s, F);
    dcqcn_increase(d, R);
    ev_push(s, s->now + d->timer, EV_RATE_TIMER, f, gen, 0);
}

/* alpha's periodic update, done lazily: at each alpha_period boundary since the flow started,
 * alpha <- (1-g) alpha unless a CNP arrived in the period that ended there */
static void alpha_catch_up(Sim *s, const Flow *F) {
    Run *R = flow_run(s, F);
    const Dcqcn *d = flow_rp(s, F);
    int64_t k = (s->now - F->t_start) / d->alpha_period;
    if (k <= R->alpha_periods) return;
    int64_t decays = k - R->alpha_periods - R->cnp_seen;
    if (decays > 0) R->alpha *= pow(1 - d->g, (double)decays);
    R->alpha_periods = k;
    R->cnp_seen = 0;
}

/* bring what is reported up to date at the end of a run */
void settle_flows(Sim *s) {
    for (int f = 0; f < s->n_flows; f++)
        if (s->flows[f].dcqcn && s->flows[f].state == FL_SENDING) alpha_catch_up(s, &s->flows[f]);
}

/* a CNP reached the flow's sender: cut the rate by alpha/2, raise alpha, restart the counters
 * (a sender whose ECN is off counts it and goes on) */
void on_cnp(Sim *s, int f) {
    Flow *F = &s->flows[f];
    F->cnps++;
    const Dcqcn *d = flow_rp(s, F);
    if (!F->dcqcn || F->state != FL_SENDING || !d->rp) return;
    alpha_catch_up(s, F);
    Run *R = flow_run(s, F);
    if (!d->clamp_after_increase || R->t_stage > 0 || R->b_stage > 0) R->rt = R->rc;
    R->rc *= 1 - R->alpha / 2;
    if (R->rc < d->min_rate) R->rc = d->min_rate;
    R->alpha = (1 - d->g) * R->alpha + d->g;
    R->cnp_seen = 1;
    R->t_stage = R->b_stage = 0;
    R->b_bytes = 0;
    ev_push(s, s->now + d->timer, EV_RATE_TIMER, f, ++R->timer_gen, 0);
}

/* ---- flows at the NIC ---- */

void on_flow_start(Sim *s, int f) {
    Flow *F = &s->flows[f];
    if (F->state != FL_WAITING) return;
    F->port = host_up_port(s, F->port);
    Port *P = &s->ports[F->port];
    F->run = run_alloc(s);
    Run *R = flow_run(s, F);
    if (s->n_colls) coll_flow_started(s, f, R);
    F->state = FL_SENDING;
    F->t_start = s->now;
    R->next_time = s->now;
    R->line = F->rate > 0 && F->rate < P->speed ? F->rate : P->speed;
    F->t_drop = -1; /* the rate is in R->line now */
    R->rc = R->rt = R->line;
    R->alpha = flow_rp(s, F)->initial_alpha;
    R->last_cnp = R->np_last_window = -1;
    if (F->dcqcn) R->np_phase = to_ps(rng_uniform(s) * (double)flow_np(s, F)->cnp_interval);
    if (F->transport) transport_start(s, f);
    if (F->size == 0) {
        F->state = FL_SENT;
        flow_account(s, f);
        return;
    }
    port_add_active(s, P, f);
    try_send(s, F->port);
}

/* flow f (sending, its run state set) joins the port's round robin */
void port_add_active(Sim *s, Port *P, int f) {
    if (P->n_active == P->cap_active) {
        P->cap_active = P->cap_active ? P->cap_active * 2 : 4;
        P->active = realloc(P->active, (size_t)P->cap_active * sizeof(Active));
    }
    const Flow *F = &s->flows[f];
    P->active[P->n_active++] = (Active){flow_run(s, F)->next_time, f, F->prio, F->transport == TR_TCP};
}

void nic_stop_sending(Sim *s, int f) {
    Flow *F = &s->flows[f];
    if (F->dcqcn) alpha_catch_up(s, F);
    F->state = FL_SENT;
    port_remove_active(&s->ports[F->port], f);
    /* open-ended or stopped early: done when what was sent is delivered or dropped */
    if (F->size < 0 || F->sent < F->size) F->size = F->sent;
    flow_account(s, f);
}

/* the next packet of the flow of the port's round robin entry A (its next_time kept in step) */
static int nic_make_packet(Sim *s, Active *A) {
    int f = A->flow;
    Flow *F = &s->flows[f];
    int64_t offset = F->sent, left = F->size < 0 ? F->pkt_size : F->size - offset;
    int size = left < F->pkt_size ? (int)left : F->pkt_size;
    int pk = pkt_alloc(s);
    Pkt *K = &s->pkts[pk];
    K->flow = f;
    K->size = size + s->hdr_bytes;
    K->dst = F->dst;
    K->in_port = -1;
    K->hash = F->hash;
    K->dscp = F->dscp;
    K->prio = F->prio;
    K->ttl = (uint8_t)F->ttl;
    K->flags = F->ect ? PK_ECT : 0;
    K->psn = (int32_t)(offset / F->pkt_size);
    F->sent += size;
    Run *R = flow_run(s, F);
    double rate = F->dcqcn ? R->rc : R->line;
    /* paced on the wire, from when the frame was due: a frame that waited less than one gap
     * for the port (behind another flow's frame) does not push the flow's later frames back
     * (counted from when it left, a flow sharing a NIC with a slightly slower one locked to
     * the slower one's rate); one that waited longer (paused) restarts the pacing from now */
    ps_t gap = to_ps((K->size + s->gap_bytes) * 8e12 / rate);
    R->next_time = (s->now - R->next_time < gap ? R->next_time : s->now) + gap;
    A->next_time = R->next_time; /* before nic_stop_sending may remove A */
    if (F->dcqcn) {
        const Dcqcn *d = flow_rp(s, F);
        if ((R->b_bytes += size) >= d->byte_counter) {
            R->b_bytes -= d->byte_counter;
            R->b_stage++;
            dcqcn_increase(d, R);
        }
    }
    if (F->transport) {
        transport_sent(s, f, offset, size);
        if (F->size >= 0 && F->sent >= F->size) {
            K->flags |= PK_LAST;
            nic_stop_sending(s, f);
        }
    } else if ((F->size >= 0 && F->sent >= F->size) || R->next_time >= F->stop) {
        nic_stop_sending(s, f);
    }
    return pk;
}

static int tcp_window_full(const Sim *s, const Flow *F) {
    const Reliable *R = &s->rel[F->rel];
    return F->sent > R->snd_una && (double)(F->sent - R->snd_una + F->pkt_size) > R->cwnd;
}

int nic_dequeue(Sim *s, int port) {
    Port *P = &s->ports[port];
    for (unsigned ready = P->nonempty; ready;) {
        int q = 31 - __builtin_clz(ready);
        if (queue_ready(s, P, q)) return q_pop(s, P, q);
        ready &= ~(1u << q);
    }
    ps_t wake = T_INF;
    for (int i = 0; i < P->n_active; i++) {
        int idx = (P->rr + i) % P->n_active;
        Active *A = &P->active[idx];
        if (port_paused(s, P, A->prio)) continue;
        if (A->tcp && tcp_window_full(s, &s->flows[A->flow])) continue; /* an ACK sends it on */
        ps_t next = A->next_time;
        if (next <= s->now) {
            P->rr = idx + 1;
            int pk = nic_make_packet(s, A);
            if (P->rr >= P->n_active) P->rr = 0;
            return pk;
        }
        if (next < wake) wake = next;
    }
    if (wake < T_INF && (P->next_kick <= s->now || wake < P->next_kick)) {
        P->next_kick = wake;
        ev_push(s, wake, EV_KICK, port, 0, 0);
    }
    return -1;
}

/* a control frame (CNP, ACK, NAK) of flow f from its receiver's port back to its sender,
 * queued on the NIC's queue `prio`; its ECMP hash is the flow's salted */
void nic_send_ctrl(Sim *s, int port, int f, int flags, int prio, int dscp, int psn, uint32_t salt) {
    Flow *F = &s->flows[f];
    int c = pkt_alloc(s);
    Pkt *C = &s->pkts[c];
    C->flow = f;
    C->size = flags & PK_CNP ? CNP_BYTES : ACK_BYTES;
    C->dst = F->src;
    C->in_port = -1;
    C->psn = psn;
    C->hash = F->hash ^ salt;
    C->dscp = (uint8_t)dscp;
    C->prio = (uint8_t)prio;
    C->ttl = 64;
    C->flags = (uint8_t)flags;
    q_push(s, &s->ports[port], prio, c);
    try_send(s, port);
}

static void send_cnp(Sim *s, int port, int f, Run *R, const Dcqcn *np) {
    R->last_cnp = s->now;
    nic_send_ctrl(s, port, f, PK_CNP, np->cnp_prio, np->cnp_dscp, 0, CNP_SALT);
}

void host_receive(Sim *s, int port, int pk) {
    Pkt *K = &s->pkts[pk];
    int f = K->flow, flags = K->flags, psn = K->psn;
    Flow *F = &s->flows[f];
    if (flags & PK_CTRL) {
        uint32_t hash = K->hash;
        pkt_free(s, pk);
        if ((flags & PK_CNP) && (hash ^ CNP_SALT) != F->hash)
            F->cnps++; /* of a collective's step before (coll.c): counted, its flow is done */
        else if (flags & PK_CNP)
            on_cnp(s, f);
        else
            transport_feedback(s, f, psn, flags);
        return;
    }
    if (K->dst != s->ports[port].node) return drop_pkt(s, pk, port, DR_NOROUTE);
    int payload = K->size - s->hdr_bytes, ce = (flags & PK_CE) != 0;
    pkt_free(s, pk); /* before the ACK takes a packet (the pool may move) */
    if (F->transport)
        transport_receive(s, port, f, psn, flags, payload);
    else
        F->delivered += payload;
    F->ce += ce;
    const Dcqcn *np = F->dcqcn && ce ? flow_np(s, F) : NULL;
    Run *R = np && np->np ? flow_run(s, F) : NULL; /* a data packet: its flow is not done, or reliable */
    if (!R) {
    } else if (np->np_window) {
        /* one CNP per cnp_interval window (each flow's windows at a random phase), sent at
         * the first marked packet of the window */
        int64_t w = (s->now + R->np_phase) / np->cnp_interval;
        if (w != R->np_last_window) {
            R->np_last_window = w;
            send_cnp(s, port, f, R, np);
        }
    } else if (R->last_cnp < 0 || s->now - R->last_cnp >= np->cnp_interval) {
        send_cnp(s, port, f, R, np);
    }
    flow_account(s, f);
}

