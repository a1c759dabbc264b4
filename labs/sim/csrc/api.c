/* The flat C API that labs/sim/native.py calls through ctypes: build a Sim from indices and
 * numbers, run it, read counters back. Also the (empty) Python module, so the extension is
 * built and found like any other. Seconds and bits per second cross this boundary; the
 * engine works in picoseconds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static void route_table_free(RouteTable *t);

static ps_t ps(double seconds) { return seconds >= 9e6 ? T_INF : llround(seconds * 1e12); }

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

Sim *sim_new(int n_nodes, int n_ports, int n_links, int n_flows, int n_profiles, int n_hosts, uint64_t seed) {
    Sim *s = calloc(1, sizeof(Sim));
    s->n_nodes = n_nodes;
    s->n_ports = n_ports;
    s->n_links = n_links;
    s->n_flows = n_flows;
    s->n_profiles = n_profiles;
    s->n_hosts = n_hosts;
    s->nodes = calloc((size_t)n_nodes, sizeof(Node));
    s->ports = huge_calloc((size_t)n_ports, sizeof(Port)); /* 64-byte aligned: see Port */
    s->port_dirty = malloc((size_t)(n_ports ? n_ports : 1) * sizeof(uint16_t));
    memset(s->port_dirty, 0xFF, (size_t)n_ports * sizeof(uint16_t));
    s->port_up = calloc((size_t)(n_ports ? n_ports : 1), 1);
    s->flows = huge_calloc((size_t)n_flows, sizeof(Flow));
    s->profiles = calloc((size_t)n_profiles, sizeof(Profile));
    s->link_ports = calloc((size_t)n_links * 2, sizeof(int32_t));
    s->dep_start = huge_calloc((size_t)n_flows + 1, sizeof(int32_t));
    s->dl_mark = malloc((size_t)n_ports * NPRIO * sizeof(int32_t));
    s->dl_reported = calloc((size_t)n_ports * NPRIO, sizeof(int32_t));
    for (int64_t i = 0; i < (int64_t)n_ports * NPRIO; i++) s->dl_mark[i] = -1;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix(&x);
    for (int i = 0; i < n_nodes; i++) s->nodes[i].salt = splitmix(&x);
    s->pkt_free = s->run_free = -1;
    evq_init(&s->evq);
    s->check_interval = s->stall_time = s->storm_time = T_INF;
    return s;
}

void sim_free(Sim *s) {
    for (int i = 0; i < s->n_ports; i++) free(s->ports[i].active);
    free(s->nodes);
    free(s->ports);
    free(s->flows);
    free(s->runs);
    free(s->rel);
    free(s->profiles);
    free(s->link_ports);
    for (int i = 0; i < s->n_tables; i++) route_table_free(&s->tables[i]); /* table 0 is the first */
    if (!s->n_tables) route_table_free(&s->rt);
    free(s->tables);
    free(s->rates);
    free(s->dep_start);
    free(s->dependents);
    free(s->storms);
    free(s->dcqs);
    evq_free(&s->evq);
    free(s->pkts);
    free(s->dl_mark);
    free(s->dl_reported);
    free(s->sample_ports);
    free(s->port_dirty);
    free(s->port_up);
    free(s->sample_last);
    free(s->changes);
    free(s->flow_samples);
    free(s->log);
    free(s->cycles);
    coll_free(s);
    free(s);
}

/* dcq: a NIC's DCQCN set (sim_set_dcqcn), 0 for a switch */
void sim_set_node(Sim *s, int i, int is_switch, int host_idx, int64_t pool, int dcq) {
    Node *n = &s->nodes[i];
    n->is_switch = (uint8_t)is_switch;
    n->host_idx = host_idx;
    n->pool = pool;
    n->dcq = (uint16_t)dcq;
}

/* maps: dscp_to_tc[64] tc_to_queue[8] tc_to_pg[8] lossless[8];
 * pg: 8 rows of (reserved, headroom, xon, xon_offset, static threshold or -1, alpha);
 * q: 8 rows of (strict, quantum, ecn, wred_drop, max bytes, kmin, kmax, pmax);
 * other: pause quanta, refresh fraction, watchdog on, action (1 drop, 2 forward), detect, restore,
 * ECN at enqueue (1) or dequeue (0) */
void sim_set_profile(Sim *s, int i, const int32_t *maps, const double *pg, const double *q, const double *other) {
    Profile *p = &s->profiles[i];
    for (int k = 0; k < 64; k++) p->dscp_to_tc[k] = (uint8_t)maps[k];
    for (int k = 0; k < NPRIO; k++) {
        p->tc_to_queue[k] = (uint8_t)maps[64 + k];
        p->tc_to_pg[k] = (uint8_t)maps[72 + k];
        p->lossless[k] = (uint8_t)maps[80 + k];
        const double *r = pg + 6 * k;
        p->pg_reserved[k] = (int64_t)r[0];
        p->pg_headroom[k] = (int64_t)r[1];
        p->pg_xon[k] = (int64_t)r[2];
        p->pg_xon_offset[k] = (int64_t)r[3];
        p->pg_static[k] = (int64_t)r[4];
        p->pg_alpha[k] = r[5];
        const double *w = q + 8 * k;
        p->q_strict[k] = (uint8_t)w[0];
        if (w[0] != 0) p->strict_mask |= (uint8_t)(1u << k);
        p->q_quantum[k] = (int64_t)w[1];
        p->q_ecn[k] = (uint8_t)w[2];
        p->q_wred_drop[k] = (uint8_t)w[3];
        p->q_max[k] = (int64_t)w[4];
        p->q_kmin[k] = w[5];
        p->q_kmax[k] = w[6];
        p->q_pmax[k] = w[7];
    }
    p->pause_quanta = (int32_t)other[0];
    p->refresh_fraction = other[1];
    p->wd_enabled = (uint8_t)other[2];
    p->wd_action = (uint8_t)other[3];
    p->wd_detect = ps(other[4]);
    p->wd_restore = ps(other[5]);
    p->ecn_enqueue = (uint8_t)other[6];
    p->cell_bytes = other[7] >= 1 ? (int32_t)other[7] : 1;
    p->cell_desc = (int32_t)other[8];
    p->pfc_resp = ps(other[9]);
}

/* a data frame is its payload plus hdr bytes of headers; on the wire every frame also takes
 * gap bytes of preamble and inter-frame gap */
void sim_set_wire(Sim *s, int hdr, int gap) {
    s->hdr_bytes = hdr;
    s->gap_bytes = gap;
}

void sim_set_port(Sim *s, int i, int node, int peer, int profile, double speed, double prop) {
    Port *p = &s->ports[i];
    p->node = node;
    p->peer = peer;
    p->profile = profile;
    p->speed = speed;
    p->ps_per_byte = 8e12 / speed;
    p->prop = ps(prop);
    p->up = s->port_up[i] = 1;
    p->next_kick = T_INF;
    for (int q = 0; q < NPRIO; q++) p->lane[q].head = p->lane[q].tail = -1;
}

void sim_set_link_ports(Sim *s, int link, int a, int b) {
    s->link_ports[2 * link] = a;
    s->link_ports[2 * link + 1] = b;
}

static int32_t *copy32(const int32_t *from, int64_t n) {
    int32_t *to = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    memcpy(to, from, (size_t)n * sizeof(int32_t));
    return to;
}

/* a copy of a route table (labs.sim.routing.RouteRows): cell (n_nodes * n_dest cells, row
 * node * n_dest + dest[host]: the next hops' offset into nh << ROUTE_COUNT_BITS | their count,
 * or -1 for the host's own), dest (a row per host), own_start (n_hosts + 1) and own (the
 * (node, cell) pairs of each host's own routes), nh (n_nh ports) */
static RouteTable route_table(const Sim *s, int n_dest, const int32_t *dest, const int32_t *cell, const int32_t *nh,
                              const int32_t *own_start, const int32_t *own, int n_nh) {
    return (RouteTable){
        .cell = copy32(cell, (int64_t)s->n_nodes * n_dest),
        .nh = copy32(nh, n_nh),
        .dest = copy32(dest, s->n_hosts),
        .own_start = copy32(own_start, s->n_hosts + 1),
        .own = copy32(own, 2 * (int64_t)own_start[s->n_hosts]),
        .n_dest = n_dest,
    };
}

static void route_table_free(RouteTable *t) {
    free(t->cell);
    free(t->nh);
    free(t->dest);
    free(t->own_start);
    free(t->own);
}

/* the route table: hosts that every node routes alike share a row (dest: each host's), each
 * distinct list of next hops held once in nh */
void sim_set_route_rows(Sim *s, int n_dest, const int32_t *dest, const int32_t *cell, const int32_t *nh,
                       const int32_t *own_start, const int32_t *own, int n_nh) {
    s->rt = route_table(s, n_dest, dest, cell, nh, own_start, own, n_nh);
}

static void set_flow(Flow *f, const int64_t *ints, const double *nums) {
    f->src = (int32_t)ints[0];
    f->dst = (int32_t)ints[1];
    f->port = (int32_t)ints[2];
    f->dscp = (uint8_t)ints[3];
    f->prio = (uint8_t)ints[4];
    f->dcqcn = (uint8_t)ints[5];
    f->ect = (uint8_t)ints[6];
    f->pkt_size = (uint16_t)ints[7];
    f->ttl = (uint8_t)ints[8];
    f->n_deps = (int32_t)ints[9];
    f->hash = (uint32_t)ints[10];
    f->transport = (uint8_t)ints[11];
    f->rel = f->run = -1;
    f->size = (int64_t)nums[0];
    f->rate = nums[1];
    f->start = ps(nums[2]);
    f->stop = ps(nums[3]);
    f->dep_delay = ps(nums[4]);
}

/* flows [first, first + n): rows of 12 ints (src, dst, port, dscp, prio, dcqcn, ect, pkt_size,
 * ttl, n_deps, hash, transport), of 5 numbers (size or -1 for open-ended, rate, start, stop,
 * dependency delay) and, one after the other, the n_deps flows each waits for; called for
 * consecutive ranges, from flow 0, after sim_set_dependents */
void sim_set_flows(Sim *s, int first, int n, const int64_t *ints, const double *nums, const int32_t *after) {
    int32_t before = s->n_rel;
    int64_t edges = 0;
    for (int i = 0; i < n; i++) {
        Flow *f = &s->flows[first + i];
        set_flow(f, ints + 12 * i, nums + 5 * i);
        if (f->transport) f->rel = s->n_rel++;
        for (int k = 0; k < f->n_deps; k++) s->dependents[s->dep_start[after[edges++]]++] = first + i;
    }
    /* dep_start[a] was moved to the end of a's dependents, the start of a + 1's */
    if (edges > 0 && (s->deps_left -= edges) == 0) {
        memmove(s->dep_start + 1, s->dep_start, (size_t)s->n_flows * sizeof(int32_t));
        s->dep_start[0] = 0;
    }
    s->rel = realloc(s->rel, (size_t)(s->n_rel ? s->n_rel : 1) * sizeof(Reliable));
    memset(s->rel + before, 0, (size_t)(s->n_rel - before) * sizeof(Reliable));
}

/* RC ACK every, TCP ACK every, duplicate ACKs that trigger a fast retransmit, RC timeout,
 * TCP minimum and maximum RTO (seconds), TCP initial window (packets), DCTCP g, trace, TCP
 * RTO before the first RTT sample (seconds) */
void sim_set_transport(Sim *s, const double *v) {
    TransportParams *t = &s->tp;
    t->rc_ack_every = (int32_t)v[0];
    t->tcp_ack_every = (int32_t)v[1];
    t->dupack_threshold = (int32_t)v[2];
    t->rc_timeout = ps(v[3]);
    t->tcp_rto_min = ps(v[4]);
    t->tcp_rto_max = ps(v[5]);
    t->tcp_initial_window = v[6];
    t->dctcp_g = v[7];
    t->trace = (uint8_t)v[8];
    t->tcp_rto_initial = ps(v[9]);
}

/* frames arriving at a port in [start, end) are lost: each data frame with probability p,
 * and the first n data frames */
void sim_set_loss(Sim *s, int port, double start, double end, double p, int64_t n) {
    Port *P = &s->ports[port];
    P->loss_from = ps(start);
    P->loss_until = ps(end);
    P->loss_p = p;
    P->loss_n = n;
}

/* start (n_flows + 1 entries): where each flow's dependents (the flows that wait for it, in
 * order) begin; sim_set_flows fills them in, from what each flow waits for */
void sim_set_dependents(Sim *s, const int32_t *start) {
    memcpy(s->dep_start, start, (size_t)(s->n_flows + 1) * sizeof(int32_t));
    s->deps_left = start[s->n_flows];
    s->dependents = huge_calloc((size_t)s->deps_left, sizeof(int32_t));
}

/* DCQCN set i (sets 0..i-1 given before): g, alpha period, timer, byte counter, F, R_AI, R_HAI,
 * min rate, CNP interval, initial alpha, CNP DSCP, CNP priority, CNP windows (1) or hold-off
 * (0), clamp after increase, reaction point on, notification point on */
void sim_set_dcqcn(Sim *s, int i, const double *v) {
    if (i >= s->n_dcqs) {
        s->dcqs = realloc(s->dcqs, (size_t)(i + 1) * sizeof(Dcqcn));
        s->n_dcqs = i + 1;
    }
    Dcqcn *d = &s->dcqs[i];
    d->g = v[0];
    d->alpha_period = ps(v[1]);
    d->timer = ps(v[2]);
    d->byte_counter = (int64_t)v[3];
    d->f = (int32_t)v[4];
    d->r_ai = v[5];
    d->r_hai = v[6];
    d->min_rate = v[7];
    d->cnp_interval = ps(v[8]);
    d->initial_alpha = v[9];
    d->cnp_dscp = (int32_t)v[10];
    d->cnp_prio = (int32_t)v[11];
    d->np_window = (uint8_t)v[12];
    d->clamp_after_increase = (uint8_t)v[13];
    d->rp = (uint8_t)v[14];
    d->np = (uint8_t)v[15];
}

/* a route table (as sim_set_route_rows takes it, after it) that replaces the current one at time t */
void sim_add_route_rows(Sim *s, double t, int n_dest, const int32_t *dest, const int32_t *cell, const int32_t *nh,
                       const int32_t *own_start, const int32_t *own, int n_nh) {
    if (s->n_tables == 0) { /* keep the first table with the others, to free them all */
        s->tables = malloc(sizeof(RouteTable));
        s->tables[0] = s->rt;
        s->n_tables = 1;
    }
    s->tables = realloc(s->tables, (size_t)(s->n_tables + 1) * sizeof(RouteTable));
    s->tables[s->n_tables] = route_table(s, n_dest, dest, cell, nh, own_start, own, n_nh);
    ev_push(s, ps(t), EV_ROUTES, s->n_tables++, 0, 0);
}

/* both ends of a link run at `speed` b/s from time t */
void sim_add_rate_event(Sim *s, int link, double t, double speed) {
    s->rates = realloc(s->rates, (size_t)(s->n_rates + 1) * sizeof(double));
    s->rates[s->n_rates] = speed;
    ev_push(s, ps(t), EV_RATE, link, s->n_rates++, 0);
}

void sim_add_link_event(Sim *s, int link, double t, int up) { ev_push(s, ps(t), EV_LINK, link, up, 0); }

void sim_add_storm(Sim *s, int port, int prio_mask, int quanta, double start, double end, double interval) {
    s->storms = realloc(s->storms, (size_t)(s->n_storms + 1) * sizeof(Storm));
    s->storms[s->n_storms] = (Storm){port, prio_mask, quanta, ps(start), ps(end), ps(interval)};
    ev_push(s, ps(start), EV_STORM, s->n_storms, 0, 0);
    s->n_storms++;
}

void sim_set_monitor(Sim *s, double interval, const int32_t *ports, int n, int flow_series) {
    s->sample_interval = ps(interval);
    s->n_sample_ports = n;
    s->sample_ports = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    memcpy(s->sample_ports, ports, (size_t)n * sizeof(int32_t));
    s->flow_series = (uint8_t)flow_series;
}

/* at most 2 n + 1 samples: then they become n + 1 at twice the interval (0: no limit) */
void sim_set_max_samples(Sim *s, int64_t n) { s->max_samples = n; }

/* the interval between samples, seconds (it doubles as sim_set_max_samples says) */
double sim_sample_interval(const Sim *s) { return (double)s->sample_interval * 1e-12; }

void sim_set_checks(Sim *s, double interval, int deadlock_on, double stall, int stop_on_deadlock, double storm_time) {
    s->check_interval = ps(interval);
    s->deadlock_on = (uint8_t)deadlock_on;
    s->stall_time = ps(stall);
    s->stop_on_deadlock = (uint8_t)stop_on_deadlock;
    s->storm_time = ps(storm_time);
}

/* run from time 0 to `duration` seconds, once; returns 1 if it stopped on a deadlock */
int sim_run(Sim *s, double duration, int stop_when_done) {
    s->stop_when_done = (uint8_t)stop_when_done;
    for (int f = 0; f < s->n_flows; f++) {
        s->open_flows++;
        if (s->flows[f].n_deps == 0) ev_push(s, s->flows[f].start, EV_FLOW_START, f, 0, 0);
    }
    if (s->sample_interval > 0 && s->sample_interval < T_INF) ev_push(s, 0, EV_SAMPLE, 0, 0, 0);
    if (s->check_interval < T_INF) ev_push(s, s->check_interval, EV_CHECK, 0, 0, 0);
    ps_t end = ps(duration);
    sim_step_all(s, end);
    settle_flows(s);
    free(s->dependents); /* needed no more: free before the results are read back */
    free(s->dep_start);
    s->dependents = s->dep_start = NULL;
    if (!s->stopped) s->now = end;
    for (int p = 0; p < s->n_ports; p++) {
        Port *P = &s->ports[p];
        for (int prio = 0; prio < NPRIO; prio++) {
            ps_t until = P->lane[prio].pause_until < s->now ? P->lane[prio].pause_until : s->now;
            if (until > P->lane[prio].pause_from) P->lane[prio].paused_total += until - P->lane[prio].pause_from;
            P->lane[prio].pause_from = P->lane[prio].pause_until = 0;
        }
    }
    return s->stopped && s->stop_on_deadlock && s->open_flows > 0;
}

double sim_now(const Sim *s) { return (double)s->now * 1e-12; }

/* out: per port, 8 rows of pfc_tx, pfc_rx, paused ps, ecn, tx bytes, tx packets, drops[DR_N] */
void sim_port_stats(const Sim *s, int64_t *out) {
    for (int i = 0; i < s->n_ports; i++) {
        const Port *p = &s->ports[i];
        for (int k = 0; k < NPRIO; k++) {
            int64_t *r = out + (i * NPRIO + k) * (6 + DR_N);
            r[0] = p->pfc_tx[k];
            r[1] = p->pfc_rx[k];
            r[2] = p->lane[k].paused_total;
            r[3] = p->ecn_marked[k];
            r[4] = p->lane[k].tx_bytes;
            r[5] = p->lane[k].tx_pkts;
            for (int d = 0; d < DR_N; d++) r[6 + d] = p->drops[d][k];
        }
    }
}

/* flows [0, n) keep their run state to the end, so that sim_flow_stats reports their final
 * rate and alpha (call before sim_run) */
void sim_keep_runs(Sim *s, int n) { s->keep_runs = n; }

/* the rate a flow sends at: DCQCN's current rate, TCP's window per smoothed RTT (at most the
 * line), or the open-loop rate; 0 before it starts, NaN once it gave its run state back */
static double flow_rate(const Sim *s, const Flow *f) {
    if (f->state == FL_WAITING) return 0.0;
    if (f->run < 0) return NAN;
    const Run *u = flow_run(s, f);
    if (f->dcqcn) return u->rc;
    if (f->transport != TR_TCP) return u->line;
    const Reliable *r = &s->rel[f->rel];
    return r->srtt > 0 ? fmin(u->line, r->cwnd * 8e12 / (double)r->srtt) : u->line;
}

/* DCTCP's alpha, or DCQCN's (as flow_rate: 0 before the start, NaN once given back) */
static double flow_alpha(const Sim *s, const Flow *f) {
    if (f->transport == TR_TCP) return s->rel[f->rel].dctcp_alpha;
    if (f->state == FL_WAITING) return 0.0;
    return f->run < 0 ? NAN : flow_run(s, f)->alpha;
}

/* out: a row per flow of flows [first, first + n): size, sent (the highest byte, retransmissions apart), delivered,
 * dropped, cnps, ce, t_start ps, t_done ps, rate, alpha (DCQCN's, or DCTCP's) */
void sim_flow_stats(const Sim *s, int first, int n, double *out) {
    for (int i = 0; i < n; i++) {
        const Flow *f = &s->flows[first + i];
        double v[] = {(double)f->size, (double)(f->transport ? s->rel[f->rel].snd_max : f->sent), (double)f->delivered, (double)f->dropped,
                      (double)f->cnps, (double)f->ce, (double)flow_t_start(f), (double)flow_t_done(f),
                      flow_rate(s, f), flow_alpha(s, f)};
        memcpy(out + 10 * i, v, sizeof(v));
    }
}

/* out: a row per flow of [first, first + n): retransmitted packets, retransmitted bytes, timeouts, NAKs, fast
 * retransmits, TCP's congestion window (bytes), TCP's smoothed RTT (ps) */
void sim_flow_transport(const Sim *s, int first, int n, double *out) {
    const Reliable none = {0};
    for (int i = 0; i < n; i++) {
        const Flow *f = &s->flows[first + i];
        const Reliable *r = f->rel >= 0 ? &s->rel[f->rel] : &none;
        double v[] = {(double)r->retx_pkts, (double)r->retx_bytes, (double)r->timeouts, (double)r->naks,
                      (double)r->fast_retx, r->cwnd, (double)r->srtt};
        memcpy(out + 7 * i, v, sizeof(v));
    }
}

/* out: per flow of [first, first + n), when its first packet was dropped (ps; -1: never) */
void sim_flow_drops(const Sim *s, int first, int n, double *out) {
    for (int i = 0; i < n; i++) out[i] = (double)flow_t_drop(&s->flows[first + i]);
}

/* out: events, packet hops, samples, log entries, cycle entries, peak packets, sample changes,
 * peak run states, routes taken ahead and used, of them not the route taken at arrival (both 0
 * unless sim_check_routes) */
void sim_counts(const Sim *s, int64_t *out) {
    out[0] = s->n_events;
    out[1] = s->n_hops;
    out[2] = s->n_samples;
    out[3] = s->n_log;
    out[4] = s->n_cycles;
    out[5] = s->pkt_cap;
    out[6] = s->n_changes;
    out[7] = s->runs_peak;
    out[8] = s->routes_kept;
    out[9] = s->routes_stale;
}

/* a self-check: every route taken ahead of an arrival is taken again when it is used */
void sim_check_routes(Sim *s) { s->check_routes = 1; }

const int32_t *sim_samples(const Sim *s) { return s->changes; } /* n_changes x (sample, column, value) */
const int64_t *sim_flow_samples(const Sim *s) { return s->flow_samples; }
const int32_t *sim_cycles(const Sim *s) { return s->cycles; }

/* out: time ps, kind, a, b, c */
void sim_log_entry(const Sim *s, int i, int64_t *out) {
    const LogEntry *e = &s->log[i];
    out[0] = e->t;
    out[1] = e->kind;
    out[2] = e->a;
    out[3] = e->b;
    out[4] = e->c;
}

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core",
                                    "C core of labs.sim, called through ctypes", -1, NULL};

PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }
