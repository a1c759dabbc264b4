/* The packet-level simulator core: types and functions shared by its C files (eventq, engine,
 * switch, nic, checks, api).
 *
 * Time is an integer number of picoseconds (ps_t), sizes are bytes, rates bits per second.
 * Every entity is an index into one of the arrays of Sim; packets live in a pool and are
 * linked into queues by index, so the pool can grow with realloc.
 */
#ifndef FT_SIM_H
#define FT_SIM_H

#include <stddef.h>
#include <stdint.h>

/* what the core's files share is hidden from the library's users (they call api.c's sim_*):
 * calls between the files go straight, not through the PLT */
#pragma GCC visibility push(hidden)

#define NPRIO 8
#define T_INF INT64_MAX
#define PFC_FRAME_BYTES 84 /* 64 B frame + preamble + IFG */
#define CNP_BYTES 64       /* a CNP's frame (its wire time adds Sim.gap_bytes) */
#define CNP_SALT 0x9e3779b9u /* a CNP's ECMP hash: its flow's, salted */
#define ACK_BYTES 64       /* an ACK's or NAK's frame (RoCEv2 ACK 66 B, TCP ACK 64 B) */

typedef int64_t ps_t;

enum EventType {
    EV_ARRIVE,       /* a: rx port, b: packet, c: its egress if taken with its bucket's, else ROUTE_UNTAKEN */
    EV_TX_DONE,      /* a: port, b: 1 at a NIC's port, 0 at a switch's; the frame on the wire ends */
    EV_KICK,         /* a: port; pause expired or pacing gap over */
    EV_PFC,          /* a: rx port, b: priority, c: quanta */
    EV_PFC_REFRESH,  /* a: port, b: PG, c: generation */
    EV_FLOW_START,   /* a: flow */
    EV_RATE_TIMER,   /* a: flow, b: generation */
    EV_LINK,         /* a: link, b: 1 up / 0 down */
    EV_STORM,        /* a: storm */
    EV_SAMPLE,
    EV_CHECK,
    EV_ROUTES,       /* a: route table (timed FIB change) */
    EV_RATE,         /* a: link, b: index into rates */
    EV_RTO,          /* a: flow; its retransmission timer */
    EV_PFC_APPLY,    /* a: port, b: priority | generation << 3, c: quanta; a pause takes effect */
    EV_COLL,         /* a: collective; its iteration ended (coll.c) */
};

enum LogKind {
    LOG_LINK_DOWN,
    LOG_LINK_UP,
    LOG_STORM_START,
    LOG_STORM_END,
    LOG_PAUSE_STORM,
    LOG_WD_DETECT,
    LOG_WD_RESTORE,
    LOG_DEADLOCK,
    LOG_LOSSLESS_DROP,
    LOG_NAK,      /* a: flow, b: the PSN the sender goes back to (transport trace) */
    LOG_TIMEOUT,  /* a: flow, b: the PSN the sender goes back to (transport trace) */
    LOG_FAST_RETX, /* a: flow, b: cwnd bytes before, c: after (transport trace) */
    LOG_ECN_CUT,  /* a: flow, b: cwnd bytes before, c: after (transport trace) */
};

/* PK_CE on an ACK is TCP's ECE; PK_LAST: the last packet of a message (RoCE's AckReq) */
enum PktFlag { PK_ECT = 1, PK_CE = 2, PK_CNP = 4, PK_ACK = 8, PK_NAK = 16, PK_LAST = 32 };
#define PK_CTRL (PK_CNP | PK_ACK | PK_NAK) /* control frames: no payload, not a flow's data */
enum Transport { TR_OPEN, TR_RC, TR_TCP };
enum WdState { WD_OFF, WD_DROP, WD_FORWARD };
enum FlowState { FL_WAITING, FL_SENDING, FL_SENT, FL_DONE };
enum DropCounter { DR_LOSSLESS, DR_LOSSY, DR_TTL, DR_NOROUTE, DR_LINK, DR_WATCHDOG, DR_N };

typedef struct {
    ps_t t;
    uint64_t seq;
    int32_t type, a, b, c;
} Event;

typedef struct {
    Event *ev;
    int64_t n, cap;
} Heap;

#define CAL_BLOCK_BITS 4 /* a bucket's head holds its block's count in these bits */
#define CAL_BLOCK ((1 << CAL_BLOCK_BITS) - 1) /* events per block of a calendar bucket: 15 */

typedef struct { /* a calendar bucket's events, CAL_BLOCK to a block (all of them but in its first) */
    Event ev[CAL_BLOCK];
    int32_t next; /* the bucket's next block (filled before this one), -1 for none */
} CalBlock;

#define CAL_SHIFT 10      /* buckets of 1024 ps */
#define CAL_BUCKETS 65536 /* a calendar of 67 us */
#define CAL_WORDS (CAL_BUCKETS / 64)

typedef struct { /* see eventq.c */
    Event *cur, *tmp; /* the current bucket's events, sorted; tmp: the sort's other half */
    int64_t cur_i, cur_n, cur_cap; /* the next one to run, how many, room */
    Heap now, later;  /* now: events made for the current bucket while it runs */
    ps_t now_end;     /* end of the bucket being drained */
    int32_t *head;    /* per bucket: the block being filled << CAL_BLOCK_BITS | its events, -1 if empty */
    uint64_t *bits;   /* per bucket: non-empty */
    CalBlock *blocks;
    int32_t free, cap;
    int64_t in_calendar, count;
} EventQueue;

typedef struct { /* 32 bytes */
    int32_t next, flow, size, dst; /* size: the frame's bytes, as a buffer holds them */
    int32_t in_port : 24;          /* at a switch: where it entered, and its PG there */
    uint32_t pg : 4;
    uint32_t next_prio : 4; /* queued behind another: the next one's priority (Lane.head_prio) */
    int32_t psn; /* data: its sequence number; ACK/NAK: the next PSN expected */
    uint32_t hash;
    uint8_t dscp, prio, ttl, flags;
} Pkt;

typedef struct {
    uint8_t dscp_to_tc[64], tc_to_queue[NPRIO], tc_to_pg[NPRIO], lossless[NPRIO];
    int64_t pg_reserved[NPRIO], pg_headroom[NPRIO], pg_xon[NPRIO], pg_xon_offset[NPRIO], pg_static[NPRIO];
    double pg_alpha[NPRIO];
    uint8_t q_strict[NPRIO], q_ecn[NPRIO], q_wred_drop[NPRIO], strict_mask, ecn_enqueue;
    int64_t q_quantum[NPRIO], q_max[NPRIO];
    double q_kmin[NPRIO], q_kmax[NPRIO], q_pmax[NPRIO];
    int32_t pause_quanta;
    double refresh_fraction;
    uint8_t wd_enabled, wd_action;
    ps_t wd_detect, wd_restore;
    int32_t cell_bytes, cell_desc; /* buffer cells: a frame holds ceil((size + desc) / cell) of them;
                                    * the switch's: every profile of its ports has them (release_pkt) */
    ps_t pfc_resp;                 /* a pause (quanta > 0) takes effect this long after it arrives */
} Profile;

/* a flow sending through a NIC port, with what the NIC's round robin reads of it (Port.active) */
typedef struct {
    ps_t next_time; /* its Run's next_time, kept in step */
    int32_t flow;
    uint8_t prio, tcp;
} Active;

/* What a port keeps per number i (0-7): egress queue i, priority i's pauses from the peer and
 * frames sent, queue i's DWRR credit in the first cache line; PG i's bytes in use and pause
 * state, and priority i's pause bookkeeping in the second. A packet through a switch reads the
 * ingress port's PG line and the egress port's queue line, nothing else of them but their
 * first lines (see Port). */
typedef struct {
    _Alignas(64) int32_t head; /* queue i's packets (each Lane 64-byte aligned) */
    int32_t tail, count;
    uint8_t head_prio;                      /* the head packet's priority, read without touching the packet */
    int64_t bytes;
    ps_t pause_until;         /* priority i paused by the peer until then */
    int64_t tx_bytes, tx_pkts; /* priority i's frames sent */
    int64_t deficit;          /* queue i's DWRR credit */
    ps_t last_deq;
    /* second line: PG i (ingress accounting), then priority i's pauses received */
    int64_t res, shared, hdrm;
    ps_t pause_from, paused_total, last_pfc_rx;
    int32_t pfc_gen; /* XONs received: a pause being processed when one came is dropped */
    int32_t pg_gen;
    uint8_t pg_paused, storm_reported, drop_logged;
} Lane;

/* A port: in its first cache line (ports are 64-byte aligned) what every packet through it
 * reads, then a Lane per priority, queue and PG (two cache lines each), then what only
 * PFC, faults, checks and NICs read. */
typedef struct {
    _Alignas(64) int32_t node; /* the whole Port 64-byte aligned */
    int32_t peer;
    uint16_t profile; /* build: fewer than 65,536 profiles */
    uint8_t up, wake, nonempty; /* wake: an EV_TX_DONE is pending; nonempty: bit q set when queue q holds packets */
    uint8_t dwrr_cur, dwrr_fresh;
    uint8_t wd_state[NPRIO];
    double ps_per_byte;
    ps_t prop, busy_until;
    ps_t loss_until;   /* a loss fault on frames arriving here ends (0: none) */
    ps_t tx_off_until; /* the transmitter disabled (a TxOff fault) until then */
    Lane lane[NPRIO];
    double speed;
    ps_t next_kick;
    /* counters per priority */
    int64_t pfc_tx[NPRIO], pfc_rx[NPRIO], ecn_marked[NPRIO];
    int64_t drops[DR_N][NPRIO];
    /* host NIC: flows sending through this port */
    Active *active;
    int32_t n_active, cap_active, rr;
    /* the loss fault: in [loss_from, loss_until), each data frame with probability loss_p,
     * and the first loss_n data frames */
    ps_t loss_from;
    double loss_p;
    int64_t loss_n;
} Port;

_Static_assert(sizeof(Lane) == 128, "a Lane is two cache lines");
_Static_assert(offsetof(Port, lane) == 64, "what every packet reads of a port is its first cache line");

typedef struct {
    uint8_t is_switch;
    uint16_t dcq; /* a NIC's DCQCN set in Sim.dcqs (0: the experiment's) */
    int32_t host_idx;
    int64_t pool, pool_used;
    uint64_t salt;
} Node;

/* What every flow keeps from build to report: its spec, progress and results (120 bytes,
 * widest fields first, no padding inside). A field whose meaning ends when the flow starts
 * shares its bytes with one that begins there: read those through flow_t_start, flow_t_done
 * and flow_t_drop. What only a sending flow needs is in its Run. */
typedef struct {
    int64_t size; /* -1: open-ended */
    union {
        ps_t start;   /* waiting: not before then */
        ps_t t_start; /* started: when */
    };
    union {
        ps_t dep_delay; /* not done: it starts that long after what it waits for is done */
        ps_t t_done;    /* done: when */
    };
    union {
        double rate; /* waiting: open loop rate, or DCQCN's starting/maximum rate; 0 = line rate */
        ps_t t_drop; /* started: when its first packet was dropped; -1: never */
    };
    ps_t stop;
    int64_t sent, delivered, dropped, cnps, ce;
    int32_t src, dst, port, n_deps;
    uint32_t hash;
    int32_t rel;      /* a reliable flow's state in Sim.rel; -1: open */
    int32_t run;      /* its run state in Sim.runs; -1: none (not started, or given back) */
    uint16_t pkt_size; /* 64-65535 (build checks) */
    uint8_t ttl, dscp, prio, dcqcn, ect, state, transport;
} Flow;

/* What a flow needs while it sends: its pacing and DCQCN's state (96 bytes). Taken from a pool
 * (Sim.runs) when the flow starts and given back when it is done, except that of a reliable
 * flow (copies it retransmitted may reach its receiver, whose notification point is here, after
 * it is done) and of a flow the caller reads the final rate of (sim_keep_runs). */
typedef struct {
    ps_t next_time;             /* its next packet may leave then */
    double rc, rt, alpha, line; /* DCQCN reaction point: current and target rate, alpha; the line rate */
    int64_t b_bytes;
    int64_t alpha_periods; /* alpha periods accounted since the flow started */
    ps_t np_phase;         /* DCQCN notification point (at its receiver) */
    ps_t last_cnp;
    int64_t np_last_window;
    union {
        int32_t t_stage;
        int32_t next_free; /* a free run state: the next one, -1 for none */
    };
    int32_t b_stage, timer_gen;
    uint8_t cnp_seen; /* a CNP arrived in the current alpha period */
} Run;

_Static_assert(sizeof(Node) == 32, "a Node is 32 bytes: its DCQCN set's index sits in its padding");
_Static_assert(sizeof(Flow) == 120, "a Flow is 120 bytes (docs/simulator.md)");
_Static_assert(sizeof(Run) == 96, "a Run is 96 bytes (docs/simulator.md)");

static inline ps_t flow_t_start(const Flow *F) { return F->state == FL_WAITING ? -1 : F->t_start; }
static inline ps_t flow_t_done(const Flow *F) { return F->state == FL_DONE ? F->t_done : -1; }
static inline ps_t flow_t_drop(const Flow *F) { return F->state == FL_WAITING ? -1 : F->t_drop; }

typedef struct { /* a reliable flow's transport (transport.c); `sent` of its Flow is the next
                  * byte to send (it goes back on a NAK, a timeout or a fast retransmit) */
    uint8_t rto_armed, in_recovery, rcv_nak, rcv_ce;
    int32_t dupacks, backoff, rcv_pending;
    int64_t snd_una, snd_max, recover, rcv_psn; /* acked, highest sent; receiver: expected */
    ps_t t_progress;                            /* the retransmission timer runs from here */
    double cwnd, ssthresh, dctcp_alpha;         /* TCP: bytes */
    int64_t rtt_seq;                            /* TCP: the byte whose ACK times an RTT; -1: none */
    ps_t rtt_t, srtt, rttvar;
    int64_t win_end, win_acked, win_marked;
    int64_t retx_pkts, retx_bytes, timeouts, naks, fast_retx;
} Reliable;

typedef struct {
    double g, min_rate, r_ai, r_hai, initial_alpha;
    ps_t alpha_period, timer, cnp_interval;
    int64_t byte_counter;
    int32_t f, cnp_dscp, cnp_prio;
    uint8_t np_window; /* one CNP per interval window; else held off for an interval */
    uint8_t clamp_after_increase;
    uint8_t rp, np; /* the NIC's ECN: its reaction point cuts on CNPs, its notification point sends them */
} Dcqcn;

typedef struct { /* transport parameters (docs/simulator.md, Transports) */
    int32_t rc_ack_every, tcp_ack_every, dupack_threshold;
    ps_t rc_timeout, tcp_rto_min, tcp_rto_max, tcp_rto_initial;
    double tcp_initial_window, dctcp_g; /* packets; DCTCP's EWMA gain */
    uint8_t trace;                      /* log NAKs, timeouts and window cuts */
} TransportParams;

typedef struct {
    int32_t port, prio_mask, quanta;
    ps_t start, end, interval;
} Storm;

typedef struct {
    ps_t t;
    int32_t kind, a, b, c;
} LogEntry;

#define ROUTE_COUNT_BITS 10 /* a route cell: offset into nh << ROUTE_COUNT_BITS | count (labs.sim.routing) */

#define ROUTE_UNTAKEN (-2) /* an arrival's Event.c before switch_route_bucket; route() gives -1 for none */

typedef struct { /* an arrival's egress port, as switch_prefetch took its route ahead of it */
    int32_t port, pk, egress; /* packet pk arriving at port; pk -1: none */
} Ahead;

typedef struct { /* a forwarding table (labs.sim.routing.RouteRows) */
    int32_t *cell;  /* node * n_dest + dest[host]: a route cell; -1: the host's own (in own) */
    int32_t *nh;    /* next-hop ports, each distinct list once */
    int32_t *dest;  /* per host its row: hosts every node routes alike (their own routes aside) share one */
    int32_t *own_start, *own; /* per host (CSR), the (node, cell) pairs of the routes that only it has:
                               * its leaves' ports to it, mostly */
    int32_t n_dest;
} RouteTable;

#define COLL_FIELDS 12 /* what sim_collective_stats writes per slot */

typedef struct { /* a collective's slot: the sums of the steps it ran (sim_collective_stats) */
    int64_t sent, delivered, dropped, cnps, ce, pkts_sent, pkts_delivered, pkts_dropped;
    ps_t first_start, last_done, first_drop; /* -1: never */
    int64_t runs;                            /* steps (a replay's row: iterations) finished */
} CollAcc;

typedef struct { /* a collective made in the core (coll.c): a ring, O(ranks x QPs), or a schedule's
                  * rows replayed each iteration, O(rows of one iteration) */
    int32_t first, n, qps, n_steps, iterations, phase; /* a ring's slots: flows [first, first + n qps) */
    int32_t records;  /* its flows [first, first + records): a ring's n qps; a replay's 2 n */
    uint8_t replay;   /* n rows (the barrier last), each with a flow for even and one for odd iterations */
    ps_t start;
    double rate;
    int64_t *chunk;                 /* ring, n: the bytes of each chunk */
    uint32_t *prefix;               /* ring, n: rank r's ECMP key prefix toward rank r + 1; replay: row's */
    char *names;                    /* the ranks' (replay: the rows') names, name_start (n + 1) where each begins */
    int32_t *name_start, *port_start, *ports; /* per rank (replay: row's source): its NIC ports (CSR) */
    int32_t iter, ranks_done;
    int32_t *started, *done, *left; /* ring, per rank: steps started, done; QPs of its step left */
    int32_t *deps;                  /* replay, n: what a row waits for in an iteration (re-armed) */
    int32_t *woken, n_woken;        /* replay: the rows that wait for the iteration before alone */
    int32_t *served;                /* replay, per flow: the iteration it runs (or ran, the last one) */
    int32_t *armed;                 /* replay, per flow: the iteration whose dependencies n_deps counts */
    int64_t held;                   /* replay: starts held back for a row's run two iterations before */
    int32_t *gen;                   /* per flow: the rate timer generation its last run reached */
    CollAcc *acc;                   /* per slot (replay: per row) */
    ps_t *ends;                     /* per iteration: when it ended */
} Coll;

typedef struct {
    /* topology */
    int32_t n_nodes, n_ports, n_links, n_flows, n_profiles, n_hosts, n_storms;
    Node *nodes;
    Port *ports;
    Flow *flows;
    Run *runs; /* a pool: the run states of flows that send (see Run) */
    int32_t cap_runs, run_free, runs_used, runs_peak, keep_runs; /* flows [0, keep_runs) keep theirs */
    Reliable *rel; /* one per flow whose transport is not open */
    int32_t n_rel;
    Profile *profiles;
    int32_t *link_ports; /* 2 per link */
    RouteTable rt; /* the forwarding table in force */
    int32_t ports_down;
    /* routes taken ahead: for the next event (ahead, by switch_prefetch) and for the event
     * running (taken: ahead when it started, or the route its bucket took for it); routed: the
     * current bucket's arrivals hold theirs (Event.c). Both dropped when the routes or a port's
     * state change (drop_routes_ahead) */
    Ahead ahead, taken;
    uint8_t routed;
    uint8_t check_routes; /* take each kept route again at arrival and count those that differ */
    int64_t routes_kept, routes_stale;
    int32_t *dep_start, *dependents; /* CSR: flow -> flows waiting for it */
    int64_t deps_left;               /* dependents sim_set_flows has still to fill in */
    Storm *storms;
    int32_t n_tables, n_rates;
    RouteTable *tables; /* timed route tables, the first one first */
    double *rates;    /* timed link speeds */
    Dcqcn *dcqs; /* DCQCN sets: a NIC uses its node's (Node.dcq) */
    int32_t n_dcqs;
    TransportParams tp;
    uint64_t rng[4];
    /* event queue */
    EventQueue evq;
    uint64_t seq;
    ps_t now;
    /* packet pool */
    Pkt *pkts;
    int32_t pkt_cap, pkt_free;
    /* frames: header bytes a data packet adds to its payload, preamble + IFG on the wire */
    int32_t hdr_bytes, gap_bytes;
    /* run control */
    int32_t open_flows;       /* flows not yet done (open-ended ones count until stopped) */
    uint8_t stop_when_done, stopped;
    /* checks */
    ps_t check_interval, stall_time, storm_time;
    uint8_t deadlock_on, stop_on_deadlock;
    int32_t *dl_mark, *dl_stack, *dl_succ, *dl_succ_start, *dl_reported;
    /* sampling */
    ps_t sample_interval;
    int32_t *sample_ports, n_sample_ports;
    uint16_t *port_dirty; /* per port: bit q (queue q's bytes), bit 8 + pg (PG pg's) changed since the last sample */
    uint8_t *port_up;    /* per port: Port.up, packed, for ECMP's scan of next hops while a port is down */
    uint8_t flow_series;
    /* queue and PG bytes (< 2 GB) of the sampled ports, n_sample_ports*16 columns, kept as
     * changes: (sample, column, value) whenever a column differs from its previous sample */
    int32_t *sample_last, *changes;
    int64_t n_changes, cap_changes;
    int64_t *flow_samples; /* rows of n_flows: bytes delivered (flow_series) */
    int64_t n_samples, samples_cap;
    int64_t max_samples; /* 0: no limit; else 2 max + 1 samples become max + 1 at twice the interval */
    /* output log */
    LogEntry *log;
    int32_t n_log, cap_log;
    int32_t *cycles, n_cycles, cap_cycles;
    /* collectives made in the core */
    Coll *colls;
    int32_t n_colls;
    /* statistics */
    int64_t n_events, n_hops;
} Sim;

/* a read of the line holding p, its value unused: a prefetch the processor cannot drop */
static inline void touch(const void *p) { __asm__ volatile("" ::"r"(*(const volatile char *)p)); }

/* eventq.c */
/* the earliest event, or NULL if none is in the current bucket (a hint for prefetches) */
static inline const Event *ev_peek(const EventQueue *q) {
    const Event *c = q->cur_i < q->cur_n ? &q->cur[q->cur_i] : NULL;
    if (q->now.n == 0) return c;
    const Event *h = &q->now.ev[0];
    return c && (c->t < h->t || (c->t == h->t && c->seq < h->seq)) ? c : h;
}
void ev_push(Sim *s, ps_t t, int type, int a, int b, int c);
int ev_next(Sim *s, ps_t until, Event *out); /* the earliest event if not after until */
void evq_init(EventQueue *q);
void evq_free(EventQueue *q);

/* engine.c */
double rng_uniform(Sim *s);
void sim_log(Sim *s, int kind, int a, int b, int c);
void sim_log_at(Sim *s, ps_t t, int kind, int a, int b, int c);
void *huge_calloc(size_t n, size_t size);
void *huge_grow(void *p, size_t used, size_t bytes);
void *pool_grow(void *items, size_t size, size_t link, int32_t *cap, int32_t *free, int32_t initial);
int pkt_alloc(Sim *s);
void pkt_free(Sim *s, int pk);
void q_push(Sim *s, Port *P, int qi, int pk);
int q_pop(Sim *s, Port *P, int qi);
void flow_done(Sim *s, int f);
void dep_met(Sim *s, int d);
int run_alloc(Sim *s);
void flow_account(Sim *s, int f);
void port_remove_active(Port *P, int f);
void drop_pkt(Sim *s, int pk, int port, int counter);
void try_send(Sim *s, int port);
void flush_queue(Sim *s, int port, int q, int counter);
int sim_step_all(Sim *s, ps_t until);

/* switch.c */
int64_t pg_threshold(const Sim *s, const Port *p, int pg);
void send_pause(Sim *s, int port, int prio_mask, int quanta);
void release_pkt(Sim *s, int pk, int port);
void on_pfc(Sim *s, int port, int prio, int quanta);
void on_pfc_apply(Sim *s, int port, int packed, int quanta);
void on_pfc_refresh(Sim *s, int port, int pg, int gen);
void switch_route_bucket(Sim *s, Event *ev, int64_t n);
void switch_prefetch(Sim *s, int port, int pk, int egress);
void switch_receive(Sim *s, int port, int pk);
int switch_dequeue(Sim *s, int port);

/* nic.c */
void on_flow_start(Sim *s, int f);
int host_up_port(const Sim *s, int port);
void on_rate_timer(Sim *s, int f, int gen);
void on_cnp(Sim *s, int f);
int nic_dequeue(Sim *s, int port);
void host_receive(Sim *s, int port, int pk);
void settle_flows(Sim *s);
void port_add_active(Sim *s, Port *P, int f);
void nic_stop_sending(Sim *s, int f);
void nic_send_ctrl(Sim *s, int port, int f, int flags, int prio, int dscp, int psn, uint32_t salt);

/* transport.c */
void transport_start(Sim *s, int f);
void transport_sent(Sim *s, int f, int64_t offset, int size);
void transport_receive(Sim *s, int port, int f, int psn, int flags, int payload);
void transport_feedback(Sim *s, int f, int psn, int flags);
void on_rto(Sim *s, int f);

/* coll.c */
void coll_flow_done(Sim *s, int f, int32_t timer_gen);
void coll_flow_started(Sim *s, int f, Run *R);
int coll_held(Sim *s, int f);
void on_coll(Sim *s, int c);
void coll_free(Sim *s);

/* checks.c */
void on_sample(Sim *s);
void on_check(Sim *s);
void on_storm(Sim *s, int storm);

/* the buffer bytes a frame of `size` bytes holds where profile `pr` accounts it: whole cells,
 * the first also holding the packet's descriptor (cell 1, descriptor 0: bytes) */
static inline int64_t buffer_bytes(const Profile *pr, int64_t size) {
    int64_t cell = pr->cell_bytes;
    return (size + pr->cell_desc + cell - 1) / cell * cell;
}

/* a non-negative duration in picoseconds, rounded (llround is a libm call) */
static inline ps_t to_ps(double x) { return (ps_t)(x + 0.5); }

/* the DCQCN set of a flow's sender (its reaction point) and of its receiver (notification point) */
static inline const Dcqcn *flow_rp(const Sim *s, const Flow *F) { return &s->dcqs[s->nodes[F->src].dcq]; }
static inline const Dcqcn *flow_np(const Sim *s, const Flow *F) { return &s->dcqs[s->nodes[F->dst].dcq]; }

/* the run state of a flow that holds one */
static inline Run *flow_run(const Sim *s, const Flow *F) { return &s->runs[F->run]; }

static inline int port_paused(const Sim *s, const Port *p, int prio) {
    return p->tx_off_until > s->now || (p->lane[prio].pause_until > s->now && p->wd_state[prio] != WD_FORWARD);
}

/* a queue holding packets whose head's priority is not paused */
static inline int queue_ready(const Sim *s, const Port *P, int q) {
    return P->lane[q].count > 0 && !port_paused(s, P, P->lane[q].head_prio);
}

#pragma GCC visibility pop

#endif
