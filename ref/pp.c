/* Pipeline parallelism: a stage runs its schedule's actions (include/minidc/pp.h) on the block
 * API, one activation set per micro-batch in flight. F receives the residual stream from the
 * previous stage (the first stage embeds), runs the stage's blocks and sends the output on (the
 * last stage runs the head and the loss); B receives the output's gradient (the last stage
 * starts from the loss), runs the blocks' backward (input gradients only when the schedule
 * splits W off) and sends the input's gradient back (the first stage finishes the embedding);
 * W runs the weight gradients. Every send is non-blocking and waited for before its buffer is
 * used again, so two neighbours sending to each other never wait on one another; receives wait.
 * The shapes are fixed at creation (B, T/seq_split, C), so only the data travels. */
#include <stdlib.h>
#include <string.h>

#include "pp_internal.h"

static double now(mdc_gpt2 *m) {
    mdc_dev_counters c;
    mdc_dev_get_counters(mdc_gpt2_device(m), &c);
    return c.now;
}

static double dev_sent(mdc_gpt2 *m) {
    mdc_dev_counters c;
    mdc_dev_get_counters(mdc_gpt2_device(m), &c);
    return c.bytes_sent;
}

mdc_status mdc_pp_create(mdc_pp **out, mdc_gpt2 *m, mdc_group *g, const char *schedule, int micro, int rows, int T) {
    *out = NULL;
    mdc_pp *pp = calloc(1, sizeof *pp);
    if (!pp) return mdc_fail(MDC_ERR_OOM_HOST, "pipeline");
    pp->g = g, pp->p = mdc_group_size(g), pp->stage = mdc_group_rank(g);
    mdc_status st = mdc_pp_schedule_build(&pp->s, schedule, pp->p, micro);
    if (st) {
        free(pp);
        return st;
    }
    /* sets: the most micro-batches this stage holds at once in its order (F to B, or to W) */
    int held = 0, peak = 0;
    for (int k = 0; k < pp->s.n[pp->stage]; k++) {
        const mdc_pp_action *a = &pp->s.a[pp->stage][k];
        if (a->kind == MDC_PP_F) held++;
        else if (a->kind == (pp->s.split ? MDC_PP_W : MDC_PP_B)) held--;
        if (held > peak) peak = held;
    }
    pp->nsets = peak;
    pp->sets = calloc((size_t)peak, sizeof *pp->sets);
    pp->slot = malloc((size_t)micro * sizeof(int));
    pp->rec = calloc(5 * (size_t)pp->s.n[pp->stage], sizeof(double));
    if (!pp->sets || !pp->slot || !pp->rec) st = mdc_fail(MDC_ERR_OOM_HOST, "pipeline");
    for (int i = 0; !st && i < peak; i++) {
        pp->sets[i].mb = -1;
        st = mdc_gpt2_acts_create(&pp->sets[i].a, m, rows, T);
    }
    const mdc_gpt2_comm *c = mdc_gpt2_get_comm(m);
    pp->floats = (size_t)rows * (size_t)(T / (c ? c->seq_split : 1)) * (size_t)mdc_gpt2_get_config(m)->C;
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
    free(pp->sets), free(pp->slot), free(pp->rec);
    mdc_pp_schedule_free(&pp->s);
    free(pp);
}

const mdc_pp_schedule *mdc_pp_get_schedule(const mdc_pp *pp) { return &pp->s; }
int mdc_pp_sets(const mdc_pp *pp) { return pp->nsets; }
double mdc_pp_step_bytes(const mdc_pp *pp) { return pp->sent; }

static mdc_status take_set(mdc_pp *pp, int mb, pp_set **out) {
    for (int i = 0; i < pp->nsets; i++)
        if (pp->sets[i].mb < 0) {
            mdc_status st = mdc_waitall(pp->sets[i].req, 2); /* its last sends are done with it */
            if (st) return st;
            pp->sets[i].mb = mb, pp->slot[mb] = i;
            *out = &pp->sets[i];
            return MDC_OK;
        }
    return mdc_fail(MDC_ERR_INVALID, "pipeline stage %d: no free activation set for micro-batch %d", pp->stage, mb);
}

mdc_status mdc_pp_run(mdc_pp *pp, mdc_step_plan *p, const int *inputs, const int *targets) {
    mdc_gpt2 *m = p->m;
    const mdc_gpt2_part *part = mdc_gpt2_get_part(m);
    size_t rows = (size_t)p->micro_batch * p->seq, bytes = pp->floats * sizeof(float);
    int last = pp->stage == pp->p - 1, first = pp->stage == 0;
    double b0 = dev_sent(m);
    mdc_dev_counters c0, c1;
    mdc_dev_get_counters(mdc_gpt2_device(m), &c0);
    mdc_status st = MDC_OK;
    for (int k = 0; !st && k < pp->s.n[pp->stage]; k++) {
        const mdc_pp_action *act = &pp->s.a[pp->stage][k];
        int mb = act->mb;
        pp_set *set = NULL;
        double *rec = pp->rec + 5 * (size_t)k;
        rec[0] = act->kind, rec[1] = mb, rec[2] = rec[3] = now(m);
        if (act->kind == MDC_PP_F) {
            if ((st = take_set(pp, mb, &set))) break;
            mdc_gpt2_acts *a = set->a;
            mdc_gpt2_acts_set_row0(a, p->row0 + mb * p->micro_batch);
            if ((st = mdc_gpt2_set_batch(a, inputs + mb * rows, targets + mb * rows, p->micro_batch, p->seq))) break;
            if (first) st = mdc_gpt2_embed_forward(m, a);
            else st = mdc_recv(mdc_gpt2_acts_input(a), bytes, pp->stage - 1, 2 * mb, pp->g), rec[3] = now(m);
            for (int l = part->layer_lo; !st && l < part->layer_hi; l++) st = mdc_gpt2_block_forward(m, a, l);
            if (st) break;
            if (last) {
                double sum = 0;
                st = mdc_gpt2_head_forward(m, a, &sum);
                p->loss_sum += sum;
            } else {
                st = mdc_isend(mdc_gpt2_acts_residual(a), bytes, pp->stage + 1, 2 * mb, pp->g, &set->req[0]);
            }
        } else {
            set = &pp->sets[pp->slot[mb]];
            mdc_gpt2_acts *a = set->a;
            if (act->kind == MDC_PP_B) {
                if (last) st = mdc_gpt2_head_backward(m, a, p->dloss);
                else st = mdc_recv(mdc_gpt2_acts_dresidual(a), bytes, pp->stage + 1, 2 * mb + 1, pp->g), rec[3] = now(m);
                int parts = pp->s.split ? MDC_BWD_INPUT : MDC_BWD_BOTH;
                for (int l = part->layer_hi - 1; !st && l >= part->layer_lo; l--) st = mdc_gpt2_block_backward(m, a, l, parts);
                if (st) break;
                if (first) st = mdc_gpt2_embed_backward(m, a);
                else st = mdc_isend(mdc_gpt2_acts_dresidual(a), bytes, pp->stage - 1, 2 * mb + 1, pp->g, &set->req[1]);
                if (!pp->s.split) set->mb = -1;
            } else {
                for (int l = part->layer_hi - 1; !st && l >= part->layer_lo; l--)
                    st = mdc_gpt2_block_backward(m, a, l, MDC_BWD_WEIGHT);
                set->mb = -1;
            }
        }
        rec[4] = now(m);
    }
    for (int i = 0; !st && i < pp->nsets; i++) st = mdc_waitall(pp->sets[i].req, 2);
    pp->sent = dev_sent(m) - b0;
    mdc_dev_get_counters(mdc_gpt2_device(m), &c1);
    pp->busy = (c1.t_compute + c1.t_memory) - (c0.t_compute + c0.t_memory), pp->t0 = c0.now, pp->t1 = c1.now;
    return st;
}

/* Per stage: the measured bubble in virtual time, the activation sets, the bytes sent, beside
 * the formulas; gathered over the pipeline group and printed by its rank 0 (call on every rank
 * of the group). */
mdc_status mdc_pp_report(const mdc_pp *pp, FILE *out) {
    double mine[5] = {pp->busy, pp->t0, pp->t1, (double)pp->nsets, pp->sent}, *all = NULL;
    if (pp->stage == 0 && !(all = malloc(sizeof(double) * 5 * (size_t)pp->p)))
        return mdc_fail(MDC_ERR_OOM_HOST, "pipeline report");
    mdc_status st = mdc_gather(mine, all, 5, MDC_F64, 0, pp->g);
    if (!st && pp->stage == 0) {
        int p = pp->p, m = pp->s.m, split = pp->s.split;
        double per = (double)pp->floats * sizeof(float);
        fprintf(out, "\npipeline: p = %d stages, m = %d micro-batches, schedule %s; one boundary tensor (b, s/sp, h) = "
                     "%.0f bytes\n", p, m, pp->s.name, per);
        double t0 = all[1], t1 = all[2]; /* the schedule's makespan over every stage's clock */
        for (int q = 1; q < p; q++) {
            if (all[5 * q + 1] < t0) t0 = all[5 * q + 1];
            if (all[5 * q + 2] > t1) t1 = all[5 * q + 2];
        }
        double span = t1 - t0;
        fprintf(out, "  makespan %.3f ms (the first start to the last end over the stages)\n", span * 1e3);
        fprintf(out, "  %-6s %12s %10s %18s %6s %10s %14s %14s\n", "stage", "busy ms", "bubble", "(p-1)/(m+p-1)", "sets",
                "formula", "bytes sent", "formula");
        for (int q = 0; q < p; q++) {
            const double *f = all + 5 * q;
            int want = !strcmp(pp->s.name, "gpipe") ? m : (p - q < m ? p - q : m);
            double bw = (double)(q < p - 1) * m * per + (double)(q > 0) * m * per;
            fprintf(out, "  %-6d %12.3f %10.3f %18.3f %6.0f %10d %14.0f %14.0f %s\n", q, f[0] * 1e3,
                    span > 0 ? 1 - f[0] / span : 0, (double)(p - 1) / (m + p - 1), f[3], want + (split ? p - 1 - q : 0),
                    f[4], bw, f[4] >= bw ? "ok" : "DIFFERS");
        }
        fprintf(out, "  bubble = 1 - busy / makespan in virtual time (the stage's kernels against the schedule's time); the "
                     "formula assumes uniform stages and free links. sets: activation sets allocated, against %s%s. "
                     "bytes: m boundary tensors to each neighbour (the sends of other schemes count too)\n",
                !strcmp(pp->s.name, "gpipe") ? "m" : "min(p-s, m)", split ? " + the p-1-s pending W" : "");
    }
    free(all);
    return st;
}
