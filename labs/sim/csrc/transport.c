/* Reliable transports at the NIC (docs/simulator.md, Transports):
 * - RoCEv2's reliable connection (RC): a PSN per packet, ACKs coalesced every rc_ack_every
 *   packets and at a message's last packet, a NAK (sequence error) at the first
 *   out-of-sequence packet, after which the responder drops out-of-sequence packets until the
 *   expected one arrives, go-back-N from the NAKed PSN, and the local ACK timeout;
 * - a TCP-like transport for lossy classes: cumulative ACKs (every tcp_ack_every packets, at
 *   once on a change of CE state, as DCTCP's receiver), slow start and additive increase,
 *   DCTCP's cut by alpha/2 once per window of marked data, NewReno's halving on three
 *   duplicate ACKs and a retransmission timeout with exponential backoff. Its receiver keeps
 *   no out-of-order data either, so a loss resends the window behind it (go-back-N).
 * Rate control (DCQCN, pacing) stays in nic.c; `sent` is the next byte to send.
 */
#include "sim.h"

#include <math.h>

/* RC: the local ACK timeout; TCP: RFC 6298's SRTT + 4 RTTVAR, at least the minimum,
 * doubled per timeout in a row */
static ps_t rto(const Sim *s, const Flow *F) {
    if (F->transport == TR_RC) return s->tp.rc_timeout;
    const Reliable *R = &s->rel[F->rel];
    ps_t t = R->srtt ? R->srtt + 4 * R->rttvar : s->tp.tcp_rto_initial;
    if (t < s->tp.tcp_rto_min) t = s->tp.tcp_rto_min;
    for (int k = 0; k < R->backoff && t < s->tp.tcp_rto_max; k++) t *= 2;
    return t < s->tp.tcp_rto_max ? t : s->tp.tcp_rto_max;
}

/* one RTT sample (RFC 6298 2.2-2.3) */
static void rtt_sample(Reliable *R, ps_t r) {
    if (!R->srtt) {
        R->srtt = r;
        R->rttvar = r / 2;
    } else {
        ps_t d = R->srtt > r ? R->srtt - r : r - R->srtt;
        R->rttvar = (3 * R->rttvar + d) / 4;
        R->srtt = (7 * R->srtt + r) / 8;
    }
}

static void rto_arm(Sim *s, int f) {
    Flow *F = &s->flows[f];
    Reliable *R = &s->rel[F->rel];
    if (R->rto_armed) return;
    R->rto_armed = 1;
    ev_push(s, R->t_progress + rto(s, F), EV_RTO, f, 0, 0);
}

void transport_start(Sim *s, int f) {
    Flow *F = &s->flows[f];
    Reliable *R = &s->rel[F->rel];
    R->cwnd = s->tp.tcp_initial_window * F->pkt_size;
    R->ssthresh = INFINITY;
    R->dctcp_alpha = 1.0; /* Linux's dctcp_alpha_on_init */
    R->rtt_seq = -1;
}

/* a data packet of `size` bytes at byte `offset` left the NIC */
void transport_sent(Sim *s, int f, int64_t offset, int size) {
    Flow *F = &s->flows[f];
    Reliable *R = &s->rel[F->rel];
    if (offset < R->snd_max) {
        R->retx_pkts++;
        R->retx_bytes += size;
    } else {
        R->snd_max = F->sent;
        if (R->rtt_seq < 0) { /* time this packet's ACK (one at a time, as BSD's TCP) */
            R->rtt_seq = F->sent;
            R->rtt_t = s->now;
        }
    }
    /* stopped: what was sent is still to be delivered */
    if (flow_run(s, F)->next_time >= F->stop && (F->size < 0 || R->snd_max < F->size)) F->size = R->snd_max;
    if (!R->rto_armed) {
        R->t_progress = s->now;
        rto_arm(s, f);
    }
}

/* send again from byte `to` (go-back-N); a flow that had sent everything sends again */
static void go_back(Sim *s, int f, int64_t to) {
    Flow *F = &s->flows[f];
    Reliable *R = &s->rel[F->rel];
    if (to >= F->sent) return;
    F->sent = to;
    R->rtt_seq = -1; /* Karn: no RTT sample across a retransmission */
    if (F->state == FL_SENT) {
        F->state = FL_SENDING;
        F->port = host_up_port(s, F->port);
        Run *N = flow_run(s, F); /* a reliable flow keeps its run state */
        if (N->next_time < s->now) N->next_time = s->now;
        port_add_active(s, &s->ports[F->port], f);
        if (F->dcqcn) ev_push(s, s->now + flow_rp(s, F)->timer, EV_RATE_TIMER, f, ++N->timer_gen, 0);
    }
    try_send(s, F->port);
}

/* ---- receiver ---- */

static void send_ack(Sim *s, int port, int f, int flags) {
    Flow *F = &s->flows[f];
    Reliable *R = &s->rel[F->rel];
    R->rcv_pending = 0;
    nic_send_ctrl(s, port, f, flags, F->prio, F->dscp, (int)R->rcv_psn, 0x85ebca6bu);
}

void transport_receive(Sim *s, int port, int f, int psn, int flags, int payload) {
    Flow *F = &s->flows[f];
    Reliable *R = &s->rel[F->rel];
    int tcp = F->transport == TR_TCP, ce = (flags & PK_CE) != 0;
    int every = tcp ? s->tp.tcp_ack_every : s->tp.rc_ack_every;
    if (psn == R->rcv_psn) {
        if (tcp && ce != R->rcv_ce && R->rcv_pending > 0) send_ack(s, port, f, PK_ACK | (R->rcv_ce ? PK_CE : 0));
        R->rcv_ce = (uint8_t)ce;
        R->rcv_psn++;
        R->rcv_nak = 0;
        F->delivered += payload;
    } else if (psn > R->rcv_psn) { /* out of sequence: dropped */
        if (tcp) {
            send_ack(s, port, f, PK_ACK); /* a duplicate ACK at once (RFC 5681 4.2) */
        } else if (!R->rcv_nak) {
            R->rcv_nak = 1; /* one NAK until the expected PSN arrives (IB spec 9.7.5.2.2) */
            send_ack(s, port, f, PK_NAK);
        }
        return;
    } /* else a duplicate of what arrived: acknowledged again, as a responder does */
    if (++R->rcv_pending >= every || (flags & PK_LAST)) send_ack(s, port, f, PK_ACK | (tcp && R->rcv_ce ? PK_CE : 0));
}

/* ---- sender ---- */

/* DCTCP, once per window of data: alpha <- (1-g) alpha + g F (F the fraction of bytes
 * acknowledged with ECE), and cwnd <- cwnd (1 - alpha/2) if any was */
static void dctcp_window(Sim *s, int f) {
    Flow *F = &s->flows[f];
    Reliable *R = &s->rel[F->rel];
    if (R->win_acked > 0) {
        double g = s->tp.dctcp_g;
        R->dctcp_alpha = (1 - g) * R->dctcp_alpha + g * (double)R->win_marked / (double)R->win_acked;
        if (R->win_marked > 0 && !R->in_recovery) {
            double before = R->cwnd;
            R->cwnd *= 1 - R->dctcp_alpha / 2;
            if (R->cwnd < F->pkt_size) R->cwnd = F->pkt_size;
            R->ssthresh = R->cwnd;
            if (s->tp.trace) sim_log(s, LOG_ECN_CUT, f, (int)before, (int)R->cwnd);
        }
    }
    R->win_acked = R->win_marked = 0;
    R->win_end = R->snd_max;
}

static void tcp_ack(Sim *s, int f, int64_t fresh, int flags) {
    Flow *F = &s->flows[f];
    Reliable *R = &s->rel[F->rel];
    double mss = F->pkt_size;
    if (fresh > 0) {
        if (R->rtt_seq >= 0 && R->snd_una >= R->rtt_seq) {
            rtt_sample(R, s->now - R->rtt_t);
            R->rtt_seq = -1;
        }
        R->win_acked += fresh;
        if (flags & PK_CE) R->win_marked += fresh;
        if (R->in_recovery && R->snd_una >= R->recover) R->in_recovery = 0;
        if (!R->in_recovery) R->cwnd += R->cwnd < R->ssthresh ? (double)fresh : mss * (double)fresh / R->cwnd;
        if (R->snd_una >= R->win_end) dctcp_window(s, f);
        try_send(s, F->port); /* the window moved */
        return;
    }
    if (R->snd_una < R->snd_max && ++R->dupacks == s->tp.dupack_threshold && !R->in_recovery &&
        R->snd_una >= R->recover) { /* fast retransmit: halve the window (RFC 5681, 6582) */
        double before = R->cwnd;
        R->ssthresh = fmax(R->cwnd / 2, 2 * mss);
        R->cwnd = R->ssthresh;
        R->in_recovery = 1;
        R->recover = R->snd_max;
        R->fast_retx++;
        if (s->tp.trace) sim_log(s, LOG_FAST_RETX, f, (int)before, (int)R->cwnd);
        go_back(s, f, R->snd_una);
    }
}

/* an ACK or NAK reached the sender; psn: the next PSN its receiver expects */
void transport_feedback(Sim *s, int f, int psn, int flags) {
    Flow *F = &s->flows[f];
    Reliable *R = &s->rel[F->rel];
    if (F->state == FL_DONE || F->state == FL_WAITING) return;
    int64_t acked = (int64_t)psn * F->pkt_size;
    if (acked > R->snd_max) acked = R->snd_max;
    int64_t fresh = acked - R->snd_una;
    if (fresh > 0) {
        R->snd_una = acked;
        R->t_progress = s->now;
        R->backoff = 0;
        R->dupacks = 0;
        if (F->sent < acked) { /* a timeout went back further than needed */
            F->sent = acked;
            if (F->state == FL_SENDING && F->size >= 0 && F->sent >= F->size) nic_stop_sending(s, f);
        }
    }
    if (F->transport == TR_TCP) {
        tcp_ack(s, f, fresh, flags);
    } else if (flags & PK_NAK) {
        R->naks++;
        if (s->tp.trace) sim_log(s, LOG_NAK, f, psn, 0);
        go_back(s, f, R->snd_una);
    }
    flow_account(s, f);
}

void on_rto(Sim *s, int f) {
    Flow *F = &s->flows[f];
    Reliable *R = &s->rel[F->rel];
    R->rto_armed = 0;
    if (F->state == FL_DONE || R->snd_una >= R->snd_max) return;
    if (R->t_progress + rto(s, F) > s->now) { /* progress since it was armed */
        rto_arm(s, f);
        return;
    }
    R->timeouts++;
    if (s->tp.trace) sim_log(s, LOG_TIMEOUT, f, (int)(R->snd_una / F->pkt_size), 0);
    if (F->transport == TR_TCP) { /* RFC 5681 3.1, RFC 6298 5.5 */
        R->ssthresh = fmax((double)(R->snd_max - R->snd_una) / 2, 2.0 * F->pkt_size);
        R->cwnd = F->pkt_size;
        R->in_recovery = 0;
        R->recover = R->snd_max;
        R->dupacks = 0;
        if (R->backoff < 16) R->backoff++;
    }
    R->t_progress = s->now;
    go_back(s, f, R->snd_una);
    rto_arm(s, f);
}
