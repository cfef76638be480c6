/* --emulate throttle really waits the modeled time (times --time-scale) in wall time, and
 * --emulate account does not. Generous bounds: this is not a timing target (see
 * `minidc bench device` for accuracy), only proof that the wait happens. */
#include "testutil.h"

static mdc_device *make(mdc_emulate_mode mode, double time_scale) {
    mdc_device_spec s;
    mdc_energy_table t;
    mdc_device *d;
    MDC_CHECK(mdc_preset_find("h100", &s));
    MDC_CHECK(mdc_energy_table_find("default", &t));
    MDC_CHECK(mdc_device_create_spec(&d, &s, &t, 1, mode, time_scale, 0));
    return d;
}

int main(void) {
    mdc_device *d = make(MDC_EMULATE_THROTTLE, 1);
    const mdc_device_spec *s = mdc_device_get_spec(d);
    /* a kernel modeled at 30 ms: 30e-3 s x 67e12 FLOP/s fp32 (+ 4 us launch) */
    double t0 = mdc_wall_time();
    mdc_dev_kernel(d, 30e-3 * s->flops_fp32, 0, MDC_PREC_FP32);
    double w = mdc_wall_time() - t0;
    fprintf(stderr, "throttled kernel of %.6f s took %.6f s\n", mdc_dev_now(d), w);
    TU_CHECK(w >= 0.0299 && w < 3.0, "kernel of 30 ms waited %.6f s", w);
    /* a copy: 1 GB over NVLink at 450 GB/s = 2.2 ms */
    t0 = mdc_wall_time();
    mdc_dev_copy(d, 1e9, MDC_LINK_NVLINK);
    w = mdc_wall_time() - t0;
    TU_CHECK(w >= 1e9 / s->nvlink_bw && w < 3.0, "copy waited %.6f s", w);
    /* idle until +20 ms */
    t0 = mdc_wall_time();
    mdc_dev_idle_until(d, mdc_dev_now(d) + 20e-3);
    w = mdc_wall_time() - t0;
    TU_CHECK(w >= 0.0199 && w < 3.0, "idle waited %.6f s", w);
    mdc_device_free(d);

    /* --time-scale 0.5: half the wall time; 40 ms virtual -> >= 20 ms wall */
    d = make(MDC_EMULATE_THROTTLE, 0.5);
    t0 = mdc_wall_time();
    mdc_dev_idle_until(d, 40e-3);
    w = mdc_wall_time() - t0;
    TU_CHECK(w >= 0.0199 && w < 0.039, "time-scale 0.5 waited %.6f s for 40 ms", w);
    mdc_device_free(d);

    /* account mode: 100 virtual seconds cost no wall time */
    d = make(MDC_EMULATE_ACCOUNT, 1);
    t0 = mdc_wall_time();
    mdc_dev_idle_until(d, 100);
    mdc_dev_kernel(d, 1e15, 0, MDC_PREC_FP32);
    w = mdc_wall_time() - t0;
    TU_CHECK(w < 0.5, "account mode waited %.6f s", w);
    TU_CHECK(mdc_dev_now(d) > 100, "clock %.3f", mdc_dev_now(d));
    mdc_device_free(d);

    /* mdc_wait_wall itself */
    t0 = mdc_wall_time();
    mdc_wait_wall(5e-3);
    w = mdc_wall_time() - t0;
    TU_CHECK(w >= 5e-3 && w < 1.0, "mdc_wait_wall(5 ms) took %.6f s", w);
    mdc_wait_wall(-1);
    mdc_wait_wall(NAN);
    return tu_finish("test_device_throttle");
}
