/* Ring collectives generated in the core as their steps become due (docs/simulator.md,
 * "Collectives in the core").
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
        if (f >= s->colls[c].first && f < s->colls[c].first + s->colls[c].n * s->colls[c].qps) return c;
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

static char *put_str(char *p, const char *text, int len) {
    memcpy(p, text, (size_t)len);
    return p + len;
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
        char digits[12], tail[16];
        uint32_t sport = 0xC000u | (crc32(digits, (size_t)(put_int(digits, q) - digits), pair) & 0x3FFFu);
        char *t = put_int(tail, (int)sport); /* 49152-65535: five digits */
        t = put_str(t, "|4791|17", 8);
        keys[q] = crc32(tail, (size_t)(t - tail), C->prefix[r]);
    }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* add what a slot's flow did in one step to the slot's sums */
static void fold(CollAcc *A, const Flow *F) {
    int64_t pkt = F->pkt_size;
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

/* rank r starts step k: each QP's flow reset to that step and started */
static void start_step(Sim *s, Coll *C, int r, int k) {
    int64_t chunk = C->chunk[((r - k) % C->n + C->n) % C->n];
    C->started[r] = k + 1;
    C->left[r] = C->qps;
    int n_ports = C->port_start[r + 1] - C->port_start[r];
    uint32_t keys[C->qps];
    step_keys(C, r, k, keys);
    for (int q = 0; q < C->qps; q++) {
        int f = C->first + r * C->qps + q;
        Flow *F = &s->flows[f];
        fold(&C->acc[f - C->first], F);
        uint32_t key = keys[q];
        F->size = chunk / C->qps + (q < chunk % C->qps);
        F->start = C->start;
        F->dep_delay = 0;
        F->rate = C->rate;
        F->sent = F->delivered = F->dropped = F->cnps = F->ce = 0;
        F->hash = key;
        F->port = C->ports[C->port_start[r] + (int)(key % (uint32_t)n_ports)];
        F->state = FL_WAITING;
        s->open_flows++;
        ev_push(s, s->now > C->start ? s->now : C->start, EV_FLOW_START, f, 0, 0);
    }
}

/* rank r's next step, if what it waits for is done */
static void try_step(Sim *s, Coll *C, int r) {
    int k = C->started[r], prev = (r + C->n - 1) % C->n;
    if (k < C->n_steps && C->done[r] == k && C->done[prev] >= k) start_step(s, C, r, k);
}

void coll_flow_done(Sim *s, int f, int32_t timer_gen) {
    int c = coll_of(s, f);
    if (c < 0) return;
    Coll *C = &s->colls[c];
    int r = (f - C->first) / C->qps;
    C->gen[f - C->first] = timer_gen;
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
    if (c >= 0) R->timer_gen = s->colls[c].gen[f - s->colls[c].first] + 1; /* stale timers never match */
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

/* flows [first, first + n qps) are the slots of a ring of n ranks (their table rows: step 0 of
 * iteration 0) running n_steps steps `iterations` times from `start`; chunk: n sizes; prefix: per
 * rank, the CRC-32 of "seed|its host|the next rank's host|"; names: the ranks' names one after
 * the other, name_start (n + 1) where each begins; port_start (n + 1) and ports: each rank's NIC
 * ports. Returns the collective's index. */
int sim_add_collective(Sim *s, int first, int n, int qps, int n_steps, int iterations, int phase, double start,
                       double rate, const int64_t *chunk, const uint32_t *prefix, const char *names,
                       const int32_t *name_start, const int32_t *port_start, const int32_t *ports) {
    if (!crc_table[0][1]) crc_init();
    s->colls = realloc(s->colls, (size_t)(s->n_colls + 1) * sizeof(Coll));
    Coll *C = &s->colls[s->n_colls];
    memset(C, 0, sizeof *C);
    C->first = first;
    C->n = n;
    C->qps = qps;
    C->n_steps = n_steps;
    C->iterations = iterations;
    C->phase = phase;
    C->start = llround(start * 1e12);
    C->rate = rate;
    C->chunk = malloc((size_t)n * sizeof(int64_t));
    memcpy(C->chunk, chunk, (size_t)n * sizeof(int64_t));
    C->prefix = malloc((size_t)n * sizeof(uint32_t));
    memcpy(C->prefix, prefix, (size_t)n * sizeof(uint32_t));
    C->name_start = malloc((size_t)(n + 1) * sizeof(int32_t));
    memcpy(C->name_start, name_start, (size_t)(n + 1) * sizeof(int32_t));
    C->names = malloc((size_t)name_start[n] + 1);
    memcpy(C->names, names, (size_t)name_start[n]);
    C->port_start = malloc((size_t)(n + 1) * sizeof(int32_t));
    memcpy(C->port_start, port_start, (size_t)(n + 1) * sizeof(int32_t));
    C->ports = malloc((size_t)(port_start[n] ? port_start[n] : 1) * sizeof(int32_t));
    memcpy(C->ports, ports, (size_t)port_start[n] * sizeof(int32_t));
    C->started = malloc((size_t)n * sizeof(int32_t));
    C->done = calloc((size_t)n, sizeof(int32_t));
    C->left = malloc((size_t)n * sizeof(int32_t));
    for (int r = 0; r < n; r++) {
        C->started[r] = 1; /* step 0 of iteration 0: the table's rows */
        C->left[r] = qps;
    }
    C->gen = calloc((size_t)n * qps, sizeof(int32_t));
    C->acc = calloc((size_t)n * qps, sizeof(CollAcc));
    for (int i = 0; i < n * qps; i++) C->acc[i].first_start = C->acc[i].last_done = C->acc[i].first_drop = -1;
    C->ends = malloc((size_t)(iterations ? iterations : 1) * sizeof(ps_t));
    s->open_flows++; /* held until its last iteration ends */
    return s->n_colls++;
}

/* out: per slot, sums of its steps so far (the current one included): bytes sent, delivered,
 * dropped, CNPs, CE marks, packets sent, delivered, dropped (each step's bytes in packets), first
 * start, last completion, first drop (ps, -1: never); then the iterations' end times (ps, -1:
 * not ended) */
void sim_collective_stats(const Sim *s, int c, int64_t *out) {
    const Coll *C = &s->colls[c];
    int slots = C->n * C->qps;
    for (int i = 0; i < slots; i++) {
        CollAcc a = C->acc[i];
        fold(&a, &s->flows[C->first + i]);
        int64_t row[] = {a.sent, a.delivered, a.dropped, a.cnps, a.ce, a.pkts_sent, a.pkts_delivered,
                         a.pkts_dropped, a.first_start, a.last_done, a.first_drop};
        memcpy(out + COLL_FIELDS * i, row, sizeof row);
    }
    for (int it = 0; it < C->iterations; it++) out[COLL_FIELDS * slots + it] = it < C->iter ? C->ends[it] : -1;
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
        free(C->gen);
        free(C->acc);
        free(C->ends);
    }
    free(s->colls);
}
