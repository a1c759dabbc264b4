/* Periodic work: occupancy samples, PFC storm sources, pause-storm and watchdog checks, and
 * deadlock detection by a cycle of stalled paused queues (docs/physics.md 4.4, 4.5).
 */
#include "sim.h"

#include <stdlib.h>

static void sample_column(Sim *s, int64_t column, int64_t bytes) {
    int32_t v = (int32_t)(bytes < INT32_MAX ? bytes : INT32_MAX); /* saturates past 2 GB */
    if (v == s->sample_last[column]) return;
    if (s->n_changes == s->cap_changes) {
        s->cap_changes = s->cap_changes ? s->cap_changes * 2 : 4096;
        s->changes = realloc(s->changes, (size_t)(3 * s->cap_changes) * sizeof(int32_t));
    }
    int32_t *c = s->changes + 3 * s->n_changes++;
    c[0] = (int32_t)s->n_samples;
    c[1] = (int32_t)column;
    c[2] = v;
    s->sample_last[column] = v;
}

/* samples [0, 2m] become [0, m] at twice the interval: sample j is what sample 2j was, a
 * column's change at sample i is its value from sample ceil(i / 2) on (a later change of the
 * column there replaces it) */
static void halve_samples(Sim *s, int64_t width, int64_t flows) {
    int64_t *at = malloc((size_t)(width ? width : 1) * sizeof(int64_t)); /* per column: its last kept change */
    for (int64_t c = 0; c < width; c++) at[c] = -1;
    int64_t kept = 0;
    for (int64_t i = 0; i < s->n_changes; i++) {
        int32_t *c = s->changes + 3 * i, sample = (c[0] + 1) / 2;
        int64_t last = at[c[1]];
        if (last >= 0 && s->changes[3 * last] == sample) {
            s->changes[3 * last + 2] = c[2];
            continue;
        }
        int32_t *out = s->changes + 3 * kept;
        out[0] = sample;
        out[1] = c[1];
        out[2] = c[2];
        at[c[1]] = kept++;
    }
    free(at);
    s->n_changes = kept;
    for (int64_t j = 1; flows && 2 * j < s->n_samples; j++)
        for (int64_t f = 0; f < flows; f++) s->flow_samples[j * flows + f] = s->flow_samples[2 * j * flows + f];
    s->n_samples = (s->n_samples + 1) / 2;
    s->sample_interval *= 2;
}

void on_sample(Sim *s) {
    int64_t width = (int64_t)s->n_sample_ports * 2 * NPRIO, flows = s->flow_series ? s->n_flows : 0;
    if (!s->sample_last) s->sample_last = calloc((size_t)(width ? width : 1), sizeof(int32_t));
    if (flows && s->n_samples == s->samples_cap) {
        s->samples_cap = s->samples_cap ? s->samples_cap * 2 : 1024;
        s->flow_samples = realloc(s->flow_samples, (size_t)(s->samples_cap * flows) * sizeof(int64_t));
    }
    /* a queue or PG untouched since: as its last sample. Only those touched are read: reading
     * every lane of every port touched streamed 16 lines a port through the caches at each sample
     * (at 4,096 servers up to 45 MB: 44,196 switch ports, more than the last level holds) */
    for (int i = 0; i < s->n_sample_ports; i++) {
        unsigned dirty = s->port_dirty[s->sample_ports[i]];
        if (!dirty) continue;
        const Port *P = &s->ports[s->sample_ports[i]];
        int64_t column = (int64_t)i * 2 * NPRIO;
        for (unsigned d = dirty; d; d &= d - 1) {
            int k = __builtin_ctz(d);
            const Lane *L = &P->lane[k % NPRIO];
            sample_column(s, column + k, k < NPRIO ? L->bytes : L->res + L->shared + L->hdrm);
        }
    }
    for (int i = 0; i < s->n_sample_ports; i++) s->port_dirty[s->sample_ports[i]] = 0;
    for (int f = 0; f < flows; f++) s->flow_samples[s->n_samples * flows + f] = s->flows[f].delivered;
    s->n_samples++;
    if (s->max_samples && s->n_samples == 2 * s->max_samples + 1) halve_samples(s, width, flows);
    ev_push(s, s->now + s->sample_interval, EV_SAMPLE, 0, 0, 0);
}

/* a storm, or (quanta < 0) a port's transmitter disabled from start to end: it starts no
 * frame meanwhile, sends and counts no pause frame */
void on_storm(Sim *s, int storm) {
    const Storm *S = &s->storms[storm];
    if (S->quanta < 0) {
        s->ports[S->port].tx_off_until = S->end;
        ev_push(s, S->end, EV_KICK, S->port, 0, 0);
        return;
    }
    if (s->now >= S->end) {
        sim_log(s, LOG_STORM_END, storm, S->port, 0);
        return;
    }
    if (s->now == S->start) sim_log(s, LOG_STORM_START, storm, S->port, 0);
    send_pause(s, S->port, S->prio_mask, S->quanta);
    ps_t next = s->now + S->interval;
    ev_push(s, next < S->end ? next : S->end, EV_STORM, storm, 0, 0);
}

static void pause_storms(Sim *s) {
    for (int p = 0; p < s->n_ports; p++) {
        Port *P = &s->ports[p];
        for (int prio = 0; prio < NPRIO; prio++) {
            if (P->lane[prio].pause_until <= s->now)
                P->lane[prio].storm_reported = 0;
            else if (!P->lane[prio].storm_reported && s->now - P->lane[prio].pause_from >= s->storm_time) {
                P->lane[prio].storm_reported = 1;
                sim_log(s, LOG_PAUSE_STORM, p, prio, 0);
            }
        }
    }
}

/* SONiC-style PFC watchdog: a lossless queue paused for the detection time is stormed;
 * drop flushes it and drops its traffic, forward ignores pauses; restored after the
 * restoration time without a pause frame */
static void watchdog(Sim *s) {
    for (int p = 0; p < s->n_ports; p++) {
        Port *P = &s->ports[p];
        const Profile *pr = &s->profiles[P->profile];
        if (!pr->wd_enabled || !s->nodes[P->node].is_switch) continue;
        for (int prio = 0; prio < NPRIO; prio++) {
            if (!pr->lossless[prio]) continue;
            if (P->wd_state[prio] == WD_OFF) {
                if (P->lane[prio].pause_until <= s->now || s->now - P->lane[prio].pause_from < pr->wd_detect) continue;
                P->wd_state[prio] = pr->wd_action;
                sim_log(s, LOG_WD_DETECT, p, prio, pr->wd_action);
                if (pr->wd_action == WD_DROP) {
                    flush_queue(s, p, pr->tc_to_queue[prio], DR_WATCHDOG);
                    int pg = pr->tc_to_pg[prio];
                    if (P->lane[pg].pg_paused) {
                        P->lane[pg].pg_paused = 0;
                        P->lane[pg].pg_gen++;
                        send_pause(s, p, 1 << prio, 0);
                    }
                }
                try_send(s, p);
            } else if (s->now - P->lane[prio].last_pfc_rx >= pr->wd_restore) {
                P->wd_state[prio] = WD_OFF;
                sim_log(s, LOG_WD_RESTORE, p, prio, 0);
                try_send(s, p);
            }
        }
    }
}

/* a switch egress queue that is paused, non-empty and has not moved for the stall time */
static int stalled(const Sim *s, int p, int q) {
    const Port *P = &s->ports[p];
    return s->nodes[P->node].is_switch && P->lane[q].count > 0 &&
           port_paused(s, P, s->pkts[P->lane[q].head].prio) && s->now - P->lane[q].last_deq >= s->stall_time;
}

static void record_cycle(Sim *s, const int32_t *members, int n) {
    int fresh = 0;
    for (int i = 0; i < n; i++) fresh |= !s->dl_reported[members[i]];
    if (!fresh) return;
    if (s->n_cycles + n > s->cap_cycles) {
        s->cap_cycles = (s->n_cycles + n) * 2;
        s->cycles = realloc(s->cycles, (size_t)s->cap_cycles * sizeof(int32_t));
    }
    ps_t formed = 0; /* the cycle froze at the last departure from any of its queues */
    for (int i = 0; i < n; i++) {
        int v = members[i], p = v / NPRIO;
        const Lane *q = &s->ports[p].lane[v % NPRIO];
        s->dl_reported[v] = 1;
        s->cycles[s->n_cycles + i] = p * NPRIO + s->pkts[q->head].prio;
        if (q->last_deq > formed) formed = q->last_deq;
    }
    sim_log_at(s, formed, LOG_DEADLOCK, s->n_cycles, n, 0);
    s->n_cycles += n;
    if (s->stop_on_deadlock) s->stopped = 1;
}

/* wait-for graph over stalled queues: e -> f when e is paused by the ingress PG of its peer
 * and that PG holds packets queued in f; a cycle is a deadlock */
static void deadlock(Sim *s) {
    int64_t nq = (int64_t)s->n_ports * NPRIO;
    int32_t *cand = NULL, n_cand = 0, *edges = NULL, n_edges = 0, cap_edges = 0;
    for (int64_t v = 0; v < nq; v++)
        if (stalled(s, (int)(v / NPRIO), (int)(v % NPRIO))) {
            cand = realloc(cand, (size_t)(n_cand + 1) * sizeof(int32_t));
            cand[n_cand++] = (int32_t)v;
        }
    if (n_cand < 2) {
        free(cand);
        return;
    }
    int32_t *mark = s->dl_mark; /* -1: not a candidate, else last f that linked to it */
    for (int i = 0; i < n_cand; i++) mark[cand[i]] = -2;
    for (int i = 0; i < n_cand; i++) {
        int f = cand[i];
        const Port *F = &s->ports[f / NPRIO];
        for (int pk = F->lane[f % NPRIO].head; pk >= 0; pk = s->pkts[pk].next) {
            const Pkt *K = &s->pkts[pk];
            const Port *I = &s->ports[K->in_port];
            if (I->peer < 0) continue;
            const Port *U = &s->ports[I->peer];
            int e = I->peer * NPRIO + s->profiles[U->profile].tc_to_queue[K->prio];
            if (mark[e] == -1 || mark[e] == f) continue;
            mark[e] = f;
            if (n_edges == cap_edges) {
                cap_edges = cap_edges ? 2 * cap_edges : 64;
                edges = realloc(edges, (size_t)cap_edges * 2 * sizeof(int32_t));
            }
            edges[2 * n_edges] = e;
            edges[2 * n_edges + 1] = f;
            n_edges++;
        }
    }
    /* depth-first search for a cycle; colour 0 new, 1 on the path, 2 finished */
    int32_t *colour = calloc((size_t)n_cand, sizeof(int32_t)), *path = malloc((size_t)n_cand * sizeof(int32_t));
    int32_t *cursor = malloc((size_t)n_cand * sizeof(int32_t));
    for (int i = 0; i < n_cand; i++) mark[cand[i]] = i; /* queue -> candidate number */
    for (int root = 0; root < n_cand && !s->stopped; root++) {
        if (colour[root]) continue;
        int depth = 0;
        path[depth] = root;
        cursor[depth] = 0;
        colour[root] = 1;
        while (depth >= 0) {
            int v = path[depth], next = -1;
            while (cursor[depth] < n_edges) {
                int k = cursor[depth]++;
                if (edges[2 * k] == cand[v]) {
                    next = mark[edges[2 * k + 1]];
                    break;
                }
            }
            if (next < 0) {
                colour[v] = 2;
                depth--;
            } else if (colour[next] == 1) {
                int start = depth;
                while (path[start] != next) start--;
                int32_t members[depth - start + 1];
                for (int i = start; i <= depth; i++) members[i - start] = cand[path[i]];
                record_cycle(s, members, depth - start + 1);
            } else if (colour[next] == 0) {
                colour[next] = 1;
                path[++depth] = next;
                cursor[depth] = 0;
            }
        }
    }
    for (int i = 0; i < n_cand; i++) mark[cand[i]] = -1;
    free(cand);
    free(edges);
    free(colour);
    free(path);
    free(cursor);
}

void on_check(Sim *s) {
    pause_storms(s);
    watchdog(s);
    if (s->deadlock_on) deadlock(s);
    ev_push(s, s->now + s->check_interval, EV_CHECK, 0, 0, 0);
}
