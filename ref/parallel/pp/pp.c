/* Pipeline parallelism: a stage runs its schedule's actions (include/minidc/pp.h) on the block
 * API, one activation set per micro-batch and model chunk in flight. F receives the residual
 * stream from the previous virtual stage (the first embeds), runs the chunk's blocks and sends
 * the output on (the last runs the head and the loss); B receives the output's gradient (the
 * last starts from the loss), runs the blocks' backward (input gradients only when the schedule
 * splits W off) and sends the input's gradient back (the first finishes the embedding); W runs
 * the weight gradients. Virtual stage c p + s is chunk c of stage s, so with interleaving the
 * last stage's chunk c feeds the first stage's chunk c + 1. Every send is non-blocking and
 * waited for before its buffer is written again, so two neighbours sending to each other never
 * wait on one another; receives wait. The shapes are fixed at creation (B, T/seq_split, C), so
 * only the data travels. */
#include <stdlib.h>
#include <string.h>

#include "pp_internal.h"

static double now(mdc_gpt2 *m) {
    mdc_dev_counters c;
    mdc_dev_get_counters(mdc_gpt2_device(m), &c);
    return c.now;
}

mdc_status mdc_pp_create(mdc_pp **out, mdc_gpt2 *m, mdc_group *g, const char *schedule, int micro, int rows, int T,
                         int v) {
    *out = NULL;
    mdc_pp *pp = calloc(1, sizeof *pp);
    if (!pp) return mdc_fail(MDC_ERR_OOM_HOST, "pipeline");
    pp->g = g, pp->p = mdc_group_size(g), pp->stage = mdc_group_rank(g);
    mdc_status st = mdc_pp_schedule_build(&pp->s, schedule, pp->p, micro, v);
    if (!st && mdc_gpt2_get_part(m)->chunks != v)
        st = mdc_fail(MDC_ERR_INVALID, "pipeline: the model holds %d chunk(s), the schedule runs %d",
                      mdc_gpt2_get_part(m)->chunks, v);
    if (st) {
        mdc_pp_schedule_free(&pp->s);
        free(pp);
        return st;
    }
    /* sets per chunk: the most micro-batches this stage holds at once in its order (F to B, or to W) */
    int peak[MDC_GPT2_MAX_CHUNKS] = {0}, held[MDC_GPT2_MAX_CHUNKS] = {0};
    for (int k = 0; k < pp->s.n[pp->stage]; k++) {
        const mdc_pp_action *a = &pp->s.a[pp->stage][k];
        if (a->kind == MDC_PP_F) held[a->chunk]++;
        else if (a->kind == (pp->s.split ? MDC_PP_W : MDC_PP_B)) held[a->chunk]--;
        if (held[a->chunk] > peak[a->chunk]) peak[a->chunk] = held[a->chunk];
    }
    for (int c = 0; c < v; c++) pp->nsets += peak[c];
    pp->sets = calloc((size_t)pp->nsets, sizeof *pp->sets);
    pp->slot = malloc((size_t)micro * v * sizeof(int));
    pp->rec = calloc(PP_REC * (size_t)pp->s.n[pp->stage], sizeof(double));
    if (!pp->sets || !pp->slot || !pp->rec) st = mdc_fail(MDC_ERR_OOM_HOST, "pipeline");
    for (int c = 0, i = 0; !st && c < v; c++)
        for (int k = 0; !st && k < peak[c]; k++, i++) {
            pp->sets[i].mb = -1, pp->sets[i].chunk = c;
            st = mdc_gpt2_acts_create_chunk(&pp->sets[i].a, m, rows, T, c);
        }
    const mdc_gpt2_comm *c = mdc_gpt2_get_comm(m);
    pp->floats = (size_t)rows * (size_t)(T / (c ? c->seq_split : 1)) * (size_t)mdc_gpt2_get_config(m)->C;
    /* 16 bits: the residual stream and its gradient hold values of the dtype (the same values) */
    pp->half = mdc_gpt2_get_precision(m);
    if (!st && pp->half && !(pp->h16 = mdc_host_array((2 * (size_t)pp->nsets + 1) * pp->floats * sizeof(uint16_t))))
        st = mdc_fail(MDC_ERR_OOM_HOST, "pipeline: 16-bit boundary tensors");
    if (st) {
        mdc_pp_free(pp);
        return st;
    }
    *out = pp;
    return MDC_OK;
}

void mdc_pp_free(mdc_pp *pp) {
    if (!pp) return;
    for (int i = 0; pp->sets && i < pp->nsets; i++) {
        mdc_waitall(pp->sets[i].req, 2);
        mdc_gpt2_acts_free(pp->sets[i].a);
    }
    mdc_host_array_free(pp->h16, (2 * (size_t)pp->nsets + 1) * pp->floats * sizeof(uint16_t));
    free(pp->sets), free(pp->slot), free(pp->rec);
    mdc_pp_schedule_free(&pp->s);
    free(pp);
}

const mdc_pp_schedule *mdc_pp_get_schedule(const mdc_pp *pp) { return &pp->s; }
int mdc_pp_sets(const mdc_pp *pp) { return pp->nsets; }
double mdc_pp_step_bytes(const mdc_pp *pp) { return pp->sent; }

/* A free set of the chunk, once the send of its last forward output is done with it, and that of
 * its last input gradient where the forward writes that buffer (a MoE block's work space). */
static mdc_status take_set(mdc_pp *pp, int mb, int chunk, pp_set **out) {
    for (int i = 0; i < pp->nsets; i++)
        if (pp->sets[i].mb < 0 && pp->sets[i].chunk == chunk) {
            mdc_status st = mdc_waitall(pp->sets[i].req, mdc_gpt2_acts_forward_uses_dresidual(pp->sets[i].a) ? 2 : 1);
            if (st) return st;
            pp->sets[i].mb = mb, pp->slot[chunk * pp->s.m + mb] = i;
            if (++pp->held > pp->held_peak) pp->held_peak = pp->held;
            *out = &pp->sets[i];
            return MDC_OK;
        }
    return mdc_fail(MDC_ERR_INVALID, "pipeline stage %d: no free activation set for micro-batch %d (chunk %d)",
                    pp->stage, mb, chunk);
}

/* A boundary tensor's messages: floats, or in 16 bits packed into the set's staging (dir 0 its
 * output, 1 its input gradient) and received through the shared one. */
static size_t wire_bytes(const mdc_pp *pp) { return pp->floats * (pp->half ? sizeof(uint16_t) : sizeof(float)); }
static mdc_status send_boundary(mdc_pp *pp, pp_set *set, int dir, const float *x, int to, int tg) {
    if (!pp->half) return mdc_isend(x, wire_bytes(pp), to, tg, pp->g, &set->req[dir]);
    uint16_t *h = pp->h16 + (2 * (size_t)(set - pp->sets) + (size_t)dir) * pp->floats;
    mdc_pack_half(h, x, pp->floats, pp->half == MDC_PRECISION_BF16);
    return mdc_isend(h, wire_bytes(pp), to, tg, pp->g, &set->req[dir]);
}
static mdc_status recv_boundary(mdc_pp *pp, float *x, int from, int tg) {
    if (!pp->half) return mdc_recv(x, wire_bytes(pp), from, tg, pp->g);
    uint16_t *h = pp->h16 + 2 * (size_t)pp->nsets * pp->floats;
    mdc_status st = mdc_recv(h, wire_bytes(pp), from, tg, pp->g);
    if (!st) mdc_unpack_half(x, h, pp->floats, pp->half == MDC_PRECISION_BF16);
    return st;
}

/* Message tags: the boundary into virtual stage vs of micro-batch mb, forward (0) or backward (1);
 * messages between two ranks with one tag arrive in order, so the tags may wrap. */
static int tag(const mdc_pp *pp, int mb, int vs, int dir) { return 2 * ((mb * pp->p * pp->s.v + vs) % 2048) + dir; }

/* Action F of micro-batch mb on chunk `chunk`: into a free set, the input received (or embedded),
 * the chunk's blocks, the output sent on (or the head and the loss). */
static mdc_status forward(mdc_pp *pp, mdc_step_plan *p, int mb, int chunk, const int *inputs, const int *targets,
                          double *rec, pp_set **out) {
    mdc_gpt2 *m = p->m;
    size_t rows = (size_t)p->micro_batch * p->seq;
    int P = pp->p * pp->s.v, vs = chunk * pp->p + pp->stage, lo, hi;
    int next = (pp->stage + 1) % pp->p, prev = (pp->stage + pp->p - 1) % pp->p;
    pp_set *set = NULL;
    mdc_status st = take_set(pp, mb, chunk, &set);
    if (st) return st;
    *out = set;
    mdc_gpt2_acts *a = set->a;
    mdc_gpt2_acts_layers(a, &lo, &hi);
    mdc_gpt2_acts_set_row0(a, p->row0 + mb * p->micro_batch);
    if ((st = mdc_gpt2_set_batch(a, inputs + mb * rows, targets + mb * rows, p->micro_batch, p->seq))) return st;
    if (vs == 0) st = mdc_gpt2_embed_forward(m, a);
    else st = recv_boundary(pp, mdc_gpt2_acts_input(a), prev, tag(pp, mb, vs, 0)), rec[PP_START] = now(m);
    for (int l = lo; !st && l < hi; l++) st = mdc_gpt2_block_forward(m, a, l);
    if (st) return st;
    if (vs == P - 1) {
        double sum = 0;
        st = mdc_gpt2_head_forward(m, a, &sum);
        p->loss_sum += sum;
        return st;
    }
    return send_boundary(pp, set, 0, mdc_gpt2_acts_residual(a), next, tag(pp, mb, vs + 1, 0));
}

/* The schedule's forwards alone, in its order, each set free again once its output is sent
 * (transformers' aux loss's counting forward: train.c). The loss is not kept. */
mdc_status mdc_pp_run_forward(mdc_pp *pp, mdc_step_plan *p, const int *inputs, const int *targets) {
    mdc_status st = MDC_OK;
    double rec[PP_REC], loss = p->loss_sum;
    pp->held = 0;
    for (int k = 0; !st && k < pp->s.n[pp->stage]; k++) {
        const mdc_pp_action *act = &pp->s.a[pp->stage][k];
        pp_set *set = NULL;
        if (act->kind != MDC_PP_F) continue;
        st = forward(pp, p, act->mb, act->chunk, inputs, targets, rec, &set);
        if (set) set->mb = -1, pp->held--;
    }
    for (int i = 0; !st && i < pp->nsets; i++) st = mdc_waitall(pp->sets[i].req, 2);
    p->loss_sum = loss;
    return st;
}

mdc_status mdc_pp_run(mdc_pp *pp, mdc_step_plan *p, const int *inputs, const int *targets) {
    mdc_gpt2 *m = p->m;
    int P = pp->p * pp->s.v, next = (pp->stage + 1) % pp->p, prev = (pp->stage + pp->p - 1) % pp->p;
    double b0 = mdc_dev_bytes_sent(mdc_gpt2_device(m));
    mdc_dev_counters c0, c1;
    mdc_dev_get_counters(mdc_gpt2_device(m), &c0);
    mdc_status st = MDC_OK;
    pp->held = pp->held_peak = 0;
    for (int k = 0; !st && k < pp->s.n[pp->stage]; k++) {
        const mdc_pp_action *act = &pp->s.a[pp->stage][k];
        int mb = act->mb, vs = act->chunk * pp->p + pp->stage, lo, hi;
        pp_set *set = NULL;
        double *rec = pp->rec + PP_REC * (size_t)k;
        rec[PP_KIND] = act->kind, rec[PP_MB] = mb, rec[PP_CHUNK] = act->chunk, rec[PP_WAIT] = rec[PP_START] = now(m);
        if (act->kind == MDC_PP_F) {
            if ((st = forward(pp, p, mb, act->chunk, inputs, targets, rec, &set))) break;
        } else {
            set = &pp->sets[pp->slot[act->chunk * pp->s.m + mb]];
            mdc_gpt2_acts *a = set->a;
            mdc_gpt2_acts_layers(a, &lo, &hi);
            if (act->kind == MDC_PP_B) {
                if ((st = mdc_waitall(&set->req[1], 1))) break; /* the last input gradient sent from this set */
                if (vs == P - 1) st = mdc_gpt2_head_backward(m, a, mdc_plan_dloss(p));
                else
                    st = recv_boundary(pp, mdc_gpt2_acts_dresidual(a), next, tag(pp, mb, vs, 1)),
                    rec[PP_START] = now(m);
                int parts = pp->s.split ? MDC_BWD_INPUT : MDC_BWD_BOTH;
                for (int l = hi - 1; !st && l >= lo; l--) st = mdc_gpt2_block_backward(m, a, l, parts);
                if (st) break;
                if (vs == 0) st = mdc_gpt2_embed_backward(m, a);
                else st = send_boundary(pp, set, 1, mdc_gpt2_acts_dresidual(a), prev, tag(pp, mb, vs - 1, 1));
                if (!pp->s.split) set->mb = -1, pp->held--;
            } else {
                for (int l = hi - 1; !st && l >= lo; l--) st = mdc_gpt2_block_backward(m, a, l, MDC_BWD_WEIGHT);
                set->mb = -1, pp->held--;
            }
        }
        rec[PP_END] = now(m);
    }
    for (int i = 0; !st && i < pp->nsets; i++) st = mdc_waitall(pp->sets[i].req, 2);
    pp->sent = mdc_dev_bytes_sent(mdc_gpt2_device(m)) - b0;
    mdc_dev_get_counters(mdc_gpt2_device(m), &c1);
    pp->busy = (c1.t_compute + c1.t_memory) - (c0.t_compute + c0.t_memory), pp->t0 = c0.now, pp->t1 = c1.now;
    return st;
}

/* The mean virtual seconds of this stage's F, B and W in the last step (start to end). */
