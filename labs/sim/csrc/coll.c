/* Collectives generated in the core as their steps become due (docs/simulator.md,
 * "Collectives in the core"): rings, and other schedules replayed from one iteration's rows.
 *
 * A ring over n ranks with Q queue pairs holds n x Q flows, its slots: rank r's QP q is flow
 * first + r Q + q, from rank r to rank r + 1. In step k rank r sends chunk (r - k) mod n, split
 * over its QPs; it starts step k once its own step k-1 and rank r-1's (what it forwards) are
 * done, and the next iteration starts once every rank finished the last step. A slot's flow is
 * reset and started again for each step: its counters are folded into the slot's sums first.
 * The slots are given in the flow table as the first step of the first iteration, so the core
 * starts them as any flow; everything later is made here. What the flow of a step is (size,
 * ECMP key, NIC port) is what the table of every step would have said: the same run, bit for
 * bit, in O(ranks x QPs) memory.
 *
 * A replay is any other schedule (tree, halving-doubling, all-to-all): its n rows of one
 * iteration, the barrier last, are given in the flow table twice, as iterations 0 and 1 with
 * their dependencies (iteration 1's rows that wait for no step wait for iteration 0's barrier).
 * A row's flow of an even (odd) iteration runs it again two iterations on: once what it waits
 * for is done, it counts what it waits for two iterations on (the flow table's dependents of its
 * flow are those of the same rows two iterations on; the rows waiting for an odd iteration's
 * barrier are woken here), and once it is done its counters are folded into the row's sums and
 * it is reset to that iteration (ECMP key from its name p<phase>.i<iteration>.<row's name>).
 * Rows a barrier does not wait for may still run when the next iteration starts: two flows a row
 * keep the table's run unless a row is ready while its flow still runs the iteration two before,
 * when its start is held back until that one is done (counted: `held`).
 */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t crc_table[8][256]; /* slicing by 8: table k is the CRC of a byte followed by k zeros */

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xFF];
}

/* zlib's crc32(data, start), eight bytes a round */
static uint32_t crc32(const char *data, size_t n, uint32_t start) {
    const uint8_t *d = (const uint8_t *)data;
    uint32_t c = start ^ 0xFFFFFFFFu;
    for (; n >= 8; n -= 8, d += 8) {
        uint32_t lo = c ^ ((uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24);
        uint32_t hi = (uint32_t)d[4] | (uint32_t)d[5] << 8 | (uint32_t)d[6] << 16 | (uint32_t)d[7] << 24;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
    }
    for (; n > 0; n--, d++) c = crc_table[0][(c ^ *d) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static int coll_of(const Sim *s, int f) {
    for (int c = 0; c < s->n_colls; c++)
        if (f >= s->colls[c].first && f < s->colls[c].first + s->colls[c].records) return c;
    return -1;
}

static const char *rank_name(const Coll *C, int r, int *len) {
    *len = C->name_start[r + 1] - C->name_start[r];
    return C->names + C->name_start[r];
}

/* the decimal digits of v >= 0 at p; returns the end */
static char *put_int(char *p, int v) {
    char digits[12];
    int n = 0;
    do digits[n++] = (char)('0' + v % 10); while ((v /= 10) > 0);
    while (n) *p++ = digits[--n];
    return p;
}

/* a copy of n bytes (at least one allocated) */
static void *copy(const void *from, size_t n) {
    void *to = malloc(n ? n : 1);
    if (n) memcpy(to, from, n);
    return to;
}

static char *put_str(char *p, const char *text, int len) {
    memcpy(p, text, (size_t)len);
    return p + len;
}

/* the ECMP key of a name's CRC-32 under a pair's prefix: `seed|src|dst|sport|4791|17` */
static uint32_t five_tuple(uint32_t name_crc, uint32_t prefix) {
    char tail[16];
    char *t = put_int(tail, (int)(0xC000u | (name_crc & 0x3FFFu))); /* 49152-65535: five digits */
    t = put_str(t, "|4791|17", 8);
    return crc32(tail, (size_t)(t - tail), prefix);
}

/* the ECMP keys of rank r's QPs in step k of the current iteration (keys: qps of them): the
 * CRC-32 of each one's 5-tuple (labs.sim.build.CoreFlows.keys), the UDP source port from its row
 * name p<phase>.i<iteration>.s<step>.<src>><dst>.<qp>, whose CRC is taken once up to the QP */
static void step_keys(const Coll *C, int r, int k, uint32_t *keys) {
    int la, lb;
    const char *a = rank_name(C, r, &la), *b = rank_name(C, (r + 1) % C->n, &lb);
    char name[la + lb + 48], *p = name;
    *p++ = 'p';
    p = put_int(p, C->phase);
    p = put_str(p, ".i", 2);
    p = put_int(p, C->iter);
    p = put_str(p, ".s", 2);
    p = put_int(p, k);
    *p++ = '.';
    p = put_str(p, a, la);
    *p++ = '>';
    p = put_str(p, b, lb);
    *p++ = '.';
    uint32_t pair = crc32(name, (size_t)(p - name), 0);
    for (int q = 0; q < C->qps; q++) {
        char digits[12];
        keys[q] = five_tuple(crc32(digits, (size_t)(put_int(digits, q) - digits), pair), C->prefix[r]);
    }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* add what a slot's flow did in one step to the slot's sums (finished: a step it finished) */
static void fold(CollAcc *A, const Flow *F, int finished) {
    int64_t pkt = F->pkt_size;
    A->runs += finished;
    A->sent += F->sent;
    A->delivered += F->delivered;
    A->dropped += F->dropped;
    A->cnps += F->cnps;
    A->ce += F->ce;
    A->pkts_sent += ceil_div(F->sent, pkt);
    A->pkts_delivered += ceil_div(F->delivered, pkt);
    A->pkts_dropped += ceil_div(F->dropped, pkt);
    ps_t start = flow_t_start(F), done = flow_t_done(F), drop = flow_t_drop(F);
    if (start >= 0 && (A->first_start < 0 || start < A->first_start)) A->first_start = start;
    if (done > A->last_done) A->last_done = done;
    if (drop >= 0 && (A->first_drop < 0 || drop < A->first_drop)) A->first_drop = drop;
}

/* a collective's flow F made a waiting flow again: from the collective's start at `rate`, its
 * counters cleared, its ECMP key `key` and the NIC port of entry `src` (a rank, a replay's row)
 * the key picks */
static void rearm(Sim *s, const Coll *C, Flow *F, uint32_t key, int src, double rate) {
    int n_ports = C->port_start[src + 1] - C->port_start[src];
    F->start = C->start;
    F->dep_delay = 0;
    F->rate = rate;
    F->sent = F->delivered = F->dropped = F->cnps = F->ce = 0;
    F->hash = key;
    F->port = C->ports[C->port_start[src] + (int)(key % (uint32_t)n_ports)];
    F->state = FL_WAITING;
    s->open_flows++;
}

/* rank r starts step k: each QP's flow reset to that step and started */
static void start_step(Sim *s, Coll *C, int r, int k) {
    int64_t chunk = C->chunk[((r - k) % C->n + C->n) % C->n];
    C->started[r] = k + 1;
    C->left[r] = C->qps;
    uint32_t keys[C->qps];
    step_keys(C, r, k, keys);
    for (int q = 0; q < C->qps; q++) {
        int f = C->first + r * C->qps + q;
        Flow *F = &s->flows[f];
        fold(&C->acc[f - C->first], F, 1);
        F->size = chunk / C->qps + (q < chunk % C->qps);
        rearm(s, C, F, keys[q], r, C->rate);
        ev_push(s, s->now > C->start ? s->now : C->start, EV_FLOW_START, f, 0, 0);
    }
}

/* rank r's next step, if what it waits for is done */
static void try_step(Sim *s, Coll *C, int r) {
    int k = C->started[r], prev = (r + C->n - 1) % C->n;
    if (k < C->n_steps && C->done[r] == k && C->done[prev] >= k) start_step(s, C, r, k);
}

/* record j of a replay made ready for iteration it: its counters cleared, its key and NIC port
 * those of its row's name in that iteration */
static void replay_reset(Sim *s, Coll *C, int j, int it) {
    int row = j % C->n, len;
    const char *name = rank_name(C, row, &len);
    char head[32], *p = head;
    *p++ = 'p';
    p = put_int(p, C->phase);
    p = put_str(p, ".i", 2);
    p = put_int(p, it);
    *p++ = '.';
    uint32_t key = five_tuple(crc32(name, (size_t)len, crc32(head, (size_t)(p - head), 0)), C->prefix[row]);
    rearm(s, C, &s->flows[C->first + j], key, row, row == C->n - 1 ? 0 : C->rate); /* the barrier: Flow's defaults */
    C->served[j] = it;
}

#define NEVER_READY (1 << 30) /* a replay's flow past its last iteration waits for this many */

/* record j counts what it waits for in iteration it (none past the last) */
static void replay_arm(Sim *s, Coll *C, int j, int it) {
    C->armed[j] = it;
    s->flows[C->first + j].n_deps = it < C->iterations ? C->deps[j % C->n] : NEVER_READY;
}

int coll_held(Sim *s, int f) {
    int c = coll_of(s, f);
    if (c < 0 || !s->colls[c].replay) return 0;
    Coll *C = &s->colls[c];
    int j = f - C->first, ready = C->armed[j];
    replay_arm(s, C, j, ready + 2);
    return ready != C->served[j] || s->flows[f].state != FL_WAITING; /* it still runs one before */
}

static void replay_done(Sim *s, Coll *C, int j) {
    Flow *F = &s->flows[C->first + j];
    int row = j % C->n, it = C->served[j];
    fold(&C->acc[row], F, 1);
    F->sent = F->delivered = F->dropped = F->cnps = F->ce = 0; /* in the row's sums now */
    if (row == C->n - 1) {
        C->ends[it] = s->now;
        C->iter = it + 1;
        if (it % 2 && it + 1 < C->iterations) /* rows of the next (even) iteration that wait for this barrier */
            for (int k = 0; k < C->n_woken; k++) dep_met(s, C->first + C->woken[k]);
    }
    if (it + 2 >= C->iterations) return;
    replay_reset(s, C, j, it + 2);
    if (C->armed[j] > it + 2) { /* ready while it still ran */
        C->held++;
        ev_push(s, s->now > F->start ? s->now : F->start, EV_FLOW_START, C->first + j, 0, 0);
    }
}

void coll_flow_done(Sim *s, int f, int32_t timer_gen) {
    int c = coll_of(s, f);
    if (c < 0) return;
    Coll *C = &s->colls[c];
    C->gen[f - C->first] = timer_gen;
    if (C->replay) {
        replay_done(s, C, f - C->first);
        return;
    }
    int r = (f - C->first) / C->qps;
    if (--C->left[r] > 0) return;
    if (++C->done[r] == C->n_steps && ++C->ranks_done == C->n) {
        ev_push(s, s->now > C->start ? s->now : C->start, EV_COLL, c, 0, 0);
        return;
    }
    int next = (r + 1) % C->n; /* in rank order, as the table's rows */
    try_step(s, C, r < next ? r : next);
    try_step(s, C, r < next ? next : r);
}

void coll_flow_started(Sim *s, int f, Run *R) {
    int c = coll_of(s, f);
    if (c < 0) return;
    Coll *C = &s->colls[c];
    int j = f - C->first;
    R->timer_gen = C->gen[j] + 1; /* stale timers never match */
    if (C->replay && C->armed[j] == C->served[j]) /* it waited for nothing (the run's first rows) */
        replay_arm(s, C, j, C->served[j] + 2);
}

void on_coll(Sim *s, int c) {
    Coll *C = &s->colls[c];
    C->ends[C->iter++] = s->now;
    if (C->iter == C->iterations) {
        s->open_flows--; /* the collective's own hold (sim_add_collective) */
        return;
    }
    C->ranks_done = 0;
    memset(C->done, 0, (size_t)C->n * sizeof(int32_t));
    for (int r = 0; r < C->n; r++) start_step(s, C, r, 0);
}

/* a new collective over flows [first, first + records) with `slots` sums, its ranks' (a replay:
 * rows') n names, ECMP key prefixes and NIC ports (see sim_add_collective, sim_add_replay) */
static Coll *coll_new(Sim *s, int first, int n, int records, int slots, int iterations, int phase, double start,
                      double rate, const uint32_t *prefix, const char *names, const int32_t *name_start,
                      const int32_t *port_start, const int32_t *ports) {
    if (!crc_table[0][1]) crc_init();
    s->colls = realloc(s->colls, (size_t)(s->n_colls + 1) * sizeof(Coll));
    Coll *C = &s->colls[s->n_colls];
    memset(C, 0, sizeof *C);
    C->first = first;
    C->n = n;
    C->records = records;
    C->iterations = iterations;
    C->phase = phase;
    C->start = llround(start * 1e12);
    C->rate = rate;
    C->prefix = copy(prefix, (size_t)n * sizeof(uint32_t));
    C->name_start = copy(name_start, (size_t)(n + 1) * sizeof(int32_t));
    C->names = copy(names, (size_t)name_start[n]);
    C->port_start = copy(port_start, (size_t)(n + 1) * sizeof(int32_t));
    C->ports = copy(ports, (size_t)port_start[n] * sizeof(int32_t));
    C->gen = calloc((size_t)records, sizeof(int32_t));
    C->acc = calloc((size_t)slots, sizeof(CollAcc));
    for (int i = 0; i < slots; i++) C->acc[i].first_start = C->acc[i].last_done = C->acc[i].first_drop = -1;
    C->ends = malloc((size_t)(iterations ? iterations : 1) * sizeof(ps_t));
    return C;
}

/* flows [first, first + n qps) are the slots of a ring of n ranks (their table rows: step 0 of
 * iteration 0) running n_steps steps `iterations` times from `start`; chunk: n sizes; prefix: per
 * rank, the CRC-32 of "seed|its host|the next rank's host|"; names: the ranks' names one after
 * the other, name_start (n + 1) where each begins; port_start (n + 1) and ports: each rank's NIC
 * ports. Returns the collective's index. */
int sim_add_collective(Sim *s, int first, int n, int qps, int n_steps, int iterations, int phase, double start,
                       double rate, const int64_t *chunk, const uint32_t *prefix, const char *names,
                       const int32_t *name_start, const int32_t *port_start, const int32_t *ports) {
    Coll *C = coll_new(s, first, n, n * qps, n * qps, iterations, phase, start, rate, prefix, names, name_start,
                       port_start, ports);
    C->qps = qps;
    C->n_steps = n_steps;
    C->chunk = copy(chunk, (size_t)n * sizeof(int64_t));
    C->started = malloc((size_t)n * sizeof(int32_t));
    C->done = calloc((size_t)n, sizeof(int32_t));
    C->left = malloc((size_t)n * sizeof(int32_t));
    for (int r = 0; r < n; r++) {
        C->started[r] = 1; /* step 0 of iteration 0: the table's rows */
        C->left[r] = qps;
    }
    s->open_flows++; /* held until its last iteration ends */
    return s->n_colls++;
}

/* a replayed schedule of n rows (the barrier last) whose flows [first, first + 2 n) are the table's
 * rows of iterations 0 and 1, run `iterations` (>= 2) times from `start`: deps, per row what it
 * waits for in an iteration; woken, the rows that wait for the iteration before alone; per row its
 * ECMP key prefix (CRC-32 of `seed|src|dst|`), name (after p<phase>.i<iteration>.) and its
 * source's NIC ports. Returns the collective's index. */
int sim_add_replay(Sim *s, int first, int n, int iterations, int phase, double start, double rate,
                   const int32_t *deps, const int32_t *woken, int n_woken, const uint32_t *prefix,
                   const char *names, const int32_t *name_start, const int32_t *port_start, const int32_t *ports) {
    Coll *C = coll_new(s, first, n, 2 * n, n, iterations, phase, start, rate, prefix, names, name_start, port_start,
                       ports);
    C->qps = 1;
    C->replay = 1;
    C->deps = copy(deps, (size_t)n * sizeof(int32_t));
    C->woken = copy(woken, (size_t)n_woken * sizeof(int32_t));
    C->n_woken = n_woken;
    C->served = malloc((size_t)(2 * n) * sizeof(int32_t));
    C->armed = malloc((size_t)(2 * n) * sizeof(int32_t));
    for (int j = 0; j < 2 * n; j++) C->served[j] = C->armed[j] = j / n;
    return s->n_colls++;
}

/* out: per slot, sums of its steps so far (the current one included): bytes sent, delivered,
 * dropped, CNPs, CE marks, packets sent, delivered, dropped (each step's bytes in packets), first
 * start, last completion, first drop (ps, -1: never), steps finished; then the iterations' end times (ps, -1:
 * not ended), then the starts a replay held back */
void sim_collective_stats(const Sim *s, int c, int64_t *out) {
    const Coll *C = &s->colls[c];
    int slots = C->replay ? C->n : C->n * C->qps;
    for (int i = 0; i < slots; i++) {
        CollAcc a = C->acc[i];
        const Flow *F = &s->flows[C->first + i];
        if (C->replay) { /* a done flow was folded when it was done */
            fold(&a, F, 0);
            fold(&a, &s->flows[C->first + C->n + i], 0); /* its odd iterations' flow */
        } else {
            fold(&a, F, F->state == FL_DONE); /* a done step is folded when the next one starts */
        }
        int64_t row[] = {a.sent, a.delivered, a.dropped, a.cnps, a.ce, a.pkts_sent, a.pkts_delivered,
                         a.pkts_dropped, a.first_start, a.last_done, a.first_drop, a.runs};
        memcpy(out + COLL_FIELDS * i, row, sizeof row);
    }
    for (int it = 0; it < C->iterations; it++) out[COLL_FIELDS * slots + it] = it < C->iter ? C->ends[it] : -1;
    out[COLL_FIELDS * slots + C->iterations] = C->held;
}

void coll_free(Sim *s) {
    for (int c = 0; c < s->n_colls; c++) {
        Coll *C = &s->colls[c];
        free(C->chunk);
        free(C->prefix);
        free(C->names);
        free(C->name_start);
        free(C->port_start);
        free(C->ports);
        free(C->started);
        free(C->done);
        free(C->left);
        free(C->deps);
        free(C->woken);
        free(C->served);
        free(C->armed);
        free(C->gen);
        free(C->acc);
        free(C->ends);
    }
    free(s->colls);
}
