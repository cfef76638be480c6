/* The block's observation points (ref/model/layers.h, "taps"): every site's name, width and
 * place in the block, and the layout of a tensor observed there, in one table. The dump
 * (ref/model/dump.c) is the tap that writes them; the names and layouts are its file format
 * (docs/tensor-files.md). */
#include "model_internal.h"

const mdc_i_tap_site mdc_i_tap_sites[MDC_I_DS_N] = {
    [MDC_I_DS_EMBED] = {"embed", MDC_TAP_STREAM, MDC_I_W_C},
    [MDC_I_DS_IN] = {"in", MDC_TAP_STREAM, MDC_I_W_C},
    [MDC_I_DS_LN1] = {"ln_1", MDC_TAP_F, MDC_I_W_C},
    [MDC_I_DS_QKV] = {"attn.qkv", MDC_TAP_REGION, MDC_I_W_QKV},
    [MDC_I_DS_QNORM] = {"attn.q_norm", MDC_TAP_REGION, MDC_I_W_HEADS},
    [MDC_I_DS_KNORM] = {"attn.k_norm", MDC_TAP_REGION, MDC_I_W_KV},
    [MDC_I_DS_ROPEQ] = {"attn.rope_q", MDC_TAP_REGION, MDC_I_W_HEADS},
    [MDC_I_DS_ROPEK] = {"attn.rope_k", MDC_TAP_REGION, MDC_I_W_KV},
    [MDC_I_DS_Y] = {"attn.y", MDC_TAP_REGION, MDC_I_W_HEADS},
    [MDC_I_DS_ATTP] = {"attn.c_proj", MDC_TAP_G, MDC_I_W_C},
    [MDC_I_DS_RES2] = {"res_2", MDC_TAP_STREAM, MDC_I_W_C},
    [MDC_I_DS_LN2] = {"ln_2", MDC_TAP_F, MDC_I_W_C},
    [MDC_I_DS_FC] = {"mlp.c_fc", MDC_TAP_REGION, MDC_I_W_FC},
    [MDC_I_DS_GATE] = {"mlp.gate", MDC_TAP_REGION, MDC_I_W_FC},
    [MDC_I_DS_UP] = {"mlp.up", MDC_TAP_REGION, MDC_I_W_FC},
    [MDC_I_DS_GELU] = {"mlp.gelu", MDC_TAP_REGION, MDC_I_W_FC},
    [MDC_I_DS_MLPP] = {"mlp.c_proj", MDC_TAP_G, MDC_I_W_C},
    [MDC_I_DS_ROUTER] = {"mlp.router", MDC_TAP_STREAM, MDC_I_W_E},
    [MDC_I_DS_CHOICE] = {"mlp.choice", MDC_TAP_STREAM, MDC_I_W_KI},
    [MDC_I_DS_GATES] = {"mlp.gates", MDC_TAP_STREAM, MDC_I_W_K},
    [MDC_I_DS_EXPERTS] = {"mlp.experts", MDC_TAP_STREAM, MDC_I_W_KC},
    [MDC_I_DS_SHARED] = {"mlp.shared", MDC_TAP_G, MDC_I_W_C},
    [MDC_I_DS_MOE] = {"mlp.moe", MDC_TAP_STREAM, MDC_I_W_C},
    [MDC_I_DS_OUT] = {"out", MDC_TAP_STREAM, MDC_I_W_C},
    [MDC_I_DS_LNF] = {"ln_f", MDC_TAP_F, MDC_I_W_C},
    [MDC_I_DS_LOGITS] = {"logits", MDC_TAP_REGION, MDC_I_W_V},
    [MDC_I_DS_LOSSES] = {"losses", MDC_TAP_REGION, MDC_I_W_NONE},
};

/* f: the residual stream's rows before it, the region after it (forward), the region's partial
 * sums before its backward and the rows after; g the other way round. Without SP the two
 * layouts are the same rows. */
void mdc_i_tap_layout(int site, int dir, int phase, int *rows, int *sum) {
    int place = mdc_i_tap_sites[site].place;
    *sum = 0;
    if (place == MDC_TAP_STREAM || phase == MDC_TAP_AT) {
        *rows = place == MDC_TAP_REGION ? MDC_I_SEQ : MDC_I_ROWS;
        return;
    }
    if (place == MDC_TAP_REGION) {
        *rows = MDC_I_SEQ;
        return;
    }
    /* the region's side of the point: after f going forward, before it going backward */
    int region = (place == MDC_TAP_F) == (dir == MDC_TAP_FWD) ? phase == MDC_TAP_POST : phase == MDC_TAP_PRE;
    *rows = region ? MDC_I_SEQ : MDC_I_ROWS;
    *sum = region && phase == MDC_TAP_PRE; /* a partial sum over tp waits for its reduction */
}

const char *mdc_i_tap_site_name(const mdc_gpt2 *m, int site) {
    return mdc_i_family(&m->cfg) && site == MDC_I_DS_GELU ? "mlp.product" : mdc_i_tap_sites[site].name;
}

mdc_status mdc_i_tap_cols(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, int dir, const float *x, int ld,
                          int col0) {
    if (!m->tap) return MDC_OK;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    int w = mdc_i_tap_sites[site].width, n = w == MDC_I_W_KV ? s.KVl * s.d : w == MDC_I_W_FC ? s.Fl : s.Cl;
    float *y = malloc((size_t)s.n * n * sizeof *y);
    if (!y) return mdc_fail(MDC_ERR_OOM_HOST, "tap: %s of layer %d", mdc_i_tap_site_name(m, site), unit - 1);
    for (int r = 0; r < s.n; r++) memcpy(y + (size_t)r * n, x + (size_t)r * ld + col0, (size_t)n * sizeof *y);
    mdc_status st = m->tap(m, a, unit, site, dir, MDC_TAP_AT, y);
    free(y);
    return st;
}
