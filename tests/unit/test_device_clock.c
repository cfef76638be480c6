/* The virtual clock: exact roofline arithmetic for kernels, copies over each link, message
 * stamps (queueing on the egress link, arrival, idle when the sender is late), idle_until,
 * and --emulate off charging nothing. Expected values are computed here with the formulas of
 * docs/devices.md, in the same order of operations, so they must match bit for bit. */
#include "testutil.h"

static mdc_device *make(const mdc_device_spec *s, mdc_emulate_mode mode) {
    mdc_energy_table t;
    mdc_device *d;
    MDC_CHECK(mdc_energy_table_find("default", &t));
    MDC_CHECK(mdc_device_create_spec(&d, s, &t, 1.0, mode, 1.0, 0));
    return d;
}

int main(void) {
    mdc_device_spec s;
    MDC_CHECK(mdc_preset_find("h100", &s));
    mdc_device *d = make(&s, MDC_EMULATE_ACCOUNT);
    mdc_dev_counters c;

    /* compute-bound: 1e12 FLOP and 1e6 bytes on fp32 */
    double f1 = 1e12, b1 = 1e6;
    mdc_dev_kernel(d, f1, b1, MDC_PREC_FP32);
    double t1 = f1 / s.flops_fp32 + s.launch_overhead;
    TU_EQ_DBL(mdc_dev_now(d), t1);
    /* 1e12 / 67e12 s = 14.925 ms + 4 us: a literal check of the preset, not only the formula */
    TU_NEAR(mdc_dev_now(d), 1.0 / 67.0 + 4e-6, 1e-15);
    /* memory-bound: 1e9 FLOP, 1e10 bytes */
    double f2 = 1e9, b2 = 1e10;
    mdc_dev_kernel(d, f2, b2, MDC_PREC_FP32);
    double t2 = b2 / s.hbm_bw + s.launch_overhead;
    TU_EQ_DBL(mdc_dev_now(d), t1 + t2);
    /* bf16 uses the bf16 peak: 989e12 FLOP -> 1 s + launch */
    mdc_dev_kernel(d, 989e12, 0, MDC_PREC_BF16);
    double t3 = 989e12 / s.flops_bf16 + s.launch_overhead;
    TU_EQ_DBL(t3, 1.0 + 4e-6);
    mdc_dev_get_counters(d, &c);
    TU_EQ_DBL(c.t_compute, t1 + t3);
    TU_EQ_DBL(c.t_memory, t2);
    TU_EQ_DBL(c.flops, f1 + f2 + 989e12);
    TU_EQ_DBL(c.hbm_bytes, b1 + b2);
    TU_EQ_DBL(c.kernels, 3);
    TU_EQ_DBL(c.now, c.t_compute + c.t_memory);

    /* copies: latency + bytes / bw, per link; PCIe uses the NVLink latency */
    mdc_dev_reset_counters(d);
    mdc_dev_copy(d, 1e9, MDC_LINK_NVLINK);
    double tc = s.nvlink_latency + 1e9 / s.nvlink_bw;
    TU_EQ_DBL(mdc_dev_now(d), tc);
    mdc_dev_copy(d, 1e9, MDC_LINK_NET);
    tc += s.net_latency + 1e9 / s.net_bw;
    TU_EQ_DBL(mdc_dev_now(d), tc);
    mdc_dev_copy(d, 64e9, MDC_LINK_PCIE);
    tc += s.nvlink_latency + 64e9 / s.pcie_bw;
    TU_EQ_DBL(mdc_dev_now(d), tc);
    mdc_dev_get_counters(d, &c);
    TU_EQ_DBL(c.t_comm, tc);
    TU_EQ_DBL(c.link_bytes[MDC_LINK_PCIE], 64e9);

    /* messages: three sends queue on the egress link */
    mdc_dev_reset_counters(d);
    mdc_dev_kernel(d, 0, 0, MDC_PREC_FP32); /* now = launch overhead */
    double now0 = s.launch_overhead, B = 1e6, tb = B / s.nvlink_bw;
    mdc_msg_stamp m1 = mdc_dev_msg_depart(d, B, MDC_LINK_NVLINK);
    mdc_msg_stamp m2 = mdc_dev_msg_depart(d, B, MDC_LINK_NVLINK);
    mdc_msg_stamp m3 = mdc_dev_msg_depart(d, 2 * B, MDC_LINK_NET); /* another link: no queue */
    TU_EQ_DBL(m1.depart, now0);
    TU_EQ_DBL(m1.done, now0 + tb);
    TU_EQ_DBL(m1.arrive, now0 + tb + s.nvlink_latency);
    TU_EQ_DBL(m2.depart, now0 + tb);
    TU_EQ_DBL(m2.done, now0 + tb + tb);
    TU_EQ_DBL(m2.arrive, now0 + tb + tb + s.nvlink_latency);
    TU_EQ_DBL(m3.depart, now0);
    TU_EQ_DBL(m3.arrive, now0 + 2 * B / s.net_bw + s.net_latency);
    TU_EQ_DBL(mdc_dev_now(d), now0); /* sends are asynchronous */
    mdc_dev_msg_sent(d, m2.done);
    TU_EQ_DBL(mdc_dev_now(d), m2.done);
    mdc_dev_msg_sent(d, m1.done); /* already past: no change */
    TU_EQ_DBL(mdc_dev_now(d), m2.done);

    /* receiving: a receiver ahead of the sender only waits for nothing; one behind waits */
    mdc_device *r = make(&s, MDC_EMULATE_ACCOUNT);
    mdc_msg_stamp late = {1e-3, 1e-3 + tb, 1e-3 + tb + s.nvlink_latency};
    mdc_dev_msg_arrive(r, late, B, MDC_LINK_NVLINK);
    mdc_dev_get_counters(r, &c);
    TU_EQ_DBL(c.t_idle, 1e-3);               /* waited for the sender to start */
    TU_EQ_DBL(c.t_comm, late.arrive - 1e-3); /* then for the bytes */
    TU_EQ_DBL(c.now, late.arrive);
    mdc_dev_idle_until(r, 1.0);
    TU_EQ_DBL(mdc_dev_now(r), 1.0);
    mdc_dev_msg_arrive(r, late, B, MDC_LINK_NVLINK); /* arrived long ago: clock unchanged */
    mdc_dev_get_counters(r, &c);
    TU_EQ_DBL(c.now, 1.0);
    TU_EQ_DBL(c.t_idle, 1.0 - late.arrive + 1e-3);
    TU_EQ_DBL(c.messages_recv, 2);
    TU_EQ_DBL(c.bytes_recv, 2 * B);
    TU_EQ_DBL(c.link_bytes[MDC_LINK_NVLINK], 0); /* link bytes are counted once, by the sender */

    /* reduce: elems FLOPs, 3 elems x elem_bytes of HBM traffic */
    mdc_dev_reset_counters(r);
    mdc_dev_reduce(r, 1e6, 4);
    TU_EQ_DBL(mdc_dev_now(r), fmax(1e6 / s.flops_fp32, 12e6 / s.hbm_bw) + s.launch_overhead);

    /* --emulate off charges nothing */
    mdc_device *o = make(&s, MDC_EMULATE_OFF);
    mdc_dev_kernel(o, 1e12, 1e12, MDC_PREC_FP32);
    mdc_dev_copy(o, 1e9, MDC_LINK_NET);
    mdc_dev_count(o, 5, 5);
    mdc_msg_stamp z = mdc_dev_msg_depart(o, 1e9, MDC_LINK_NET);
    mdc_dev_get_counters(o, &c);
    TU_EQ_DBL(c.now, 0);
    TU_EQ_DBL(c.flops, 0);
    TU_EQ_DBL(c.int_ops, 0);
    TU_EQ_DBL(z.arrive, 0);

    /* a custom spec with a zero bandwidth is refused, naming the field */
    mdc_device_spec bad = s;
    bad.net_bw = 0;
    mdc_energy_table t;
    MDC_CHECK(mdc_energy_table_find("default", &t));
    mdc_device *x = NULL;
    TU_STATUS(mdc_device_create_spec(&x, &bad, &t, 1, MDC_EMULATE_ACCOUNT, 1, 0), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "net_bw");
    TU_CHECK(x == NULL, "device returned on failure");
    /* presets: vr300 / a100-80 HBM bandwidth is 15.7x; per-direction NVLink is half of NVIDIA's */
    mdc_device_spec a, v;
    MDC_CHECK(mdc_preset_find("a100-80", &a));
    MDC_CHECK(mdc_preset_find("vr300", &v));
    char ratio[16];
    snprintf(ratio, sizeof ratio, "%.1f", v.hbm_bw / a.hbm_bw);
    TU_CHECK(!strcmp(ratio, "15.7"), "vr300/a100-80 = %s", ratio);
    TU_EQ_DBL(2 * s.nvlink_bw, 900e9);
    TU_CHECK(!(s.assumed & MDC_SPEC_HBM_BW) && (v.assumed & MDC_SPEC_FLOPS_BF16), "assumed bits");
    mdc_device_free(d);
    mdc_device_free(r);
    mdc_device_free(o);
    mdc_device_free(NULL);
    return tu_finish("test_device_clock");
}
