/* The energy ledger: a known sequence of charges gives exact joules under both built-in tables
 * and under a table read from JSON. Expected figures are written out by hand (pJ x count). */
#include "testutil.h"

/* Charges the sequence: 1e9 FLOP with 2e8 HBM bytes, 1e6 int ops and 8e6 SRAM bytes, 8e3 host
 * DRAM bytes, and sends of 1e6 bytes over NVLink, 2e6 over the network, 4e6 over PCIe. */
static void charge(mdc_device *d) {
    mdc_dev_kernel(d, 1e9, 2e8, MDC_PREC_BF16);
    mdc_dev_count(d, 1e6, 8e6);
    mdc_dev_host_bytes(d, 8e3);
    mdc_dev_msg_depart(d, 1e6, MDC_LINK_NVLINK);
    mdc_dev_msg_depart(d, 2e6, MDC_LINK_NET);
    mdc_dev_copy(d, 4e6, MDC_LINK_PCIE);
}

static void check(const mdc_energy_table *t, double fp, double in, double sram, double hbm, double dram, double nvl,
                  double net, double pcie) {
    mdc_device_spec s;
    mdc_device *d;
    MDC_CHECK(mdc_preset_find("a100-80", &s));
    MDC_CHECK(mdc_device_create_spec(&d, &s, t, 1, MDC_EMULATE_ACCOUNT, 1, 0));
    charge(d);
    mdc_energy e;
    mdc_dev_energy(d, &e);
    fprintf(stderr, "table %s: total %.17g J\n", t->name, e.total);
    TU_NEAR(e.fp, fp, 1e-15);
    TU_NEAR(e.int_ops, in, 1e-15);
    TU_NEAR(e.sram, sram, 1e-15);
    TU_NEAR(e.hbm, hbm, 1e-15);
    TU_NEAR(e.host_dram, dram, 1e-15);
    TU_NEAR(e.link[MDC_LINK_NVLINK], nvl, 1e-15);
    TU_NEAR(e.link[MDC_LINK_NET], net, 1e-15);
    TU_NEAR(e.link[MDC_LINK_PCIE], pcie, 1e-15);
    TU_NEAR(e.total, fp + in + sram + hbm + dram + nvl + net + pcie, 1e-15);
    /* the report shows the formula next to the figure, and energy per token */
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    mdc_device_report(d, f, 1000);
    fclose(f);
    char want[128];
    snprintf(want, sizeof want, "= 1e+09 FLOP x %g pJ", t->pj_fp_op);
    TU_CONTAINS(text, want);
    snprintf(want, sizeof want, "%.6g J = %.6g J / 1000 tokens", e.total / 1000, e.total);
    TU_CONTAINS(text, want);
    free(text);
    mdc_device_free(d);
}

int main(void) {
    mdc_energy_table t;
    MDC_CHECK(mdc_energy_table_find("default", &t));
    /* default: FP 20 pJ, INT 1, SRAM 26 per 64b, LPDRAM 1200 per 64b, HBM 3.97 pJ/bit,
     * NVLink 1.3, network 10, PCIe 5 pJ/bit */
    check(&t, 1e9 * 20e-12, 1e6 * 1e-12, 1e6 * 26e-12, 1.6e9 * 3.97e-12, 1e3 * 1200e-12, 8e6 * 1.3e-12, 16e6 * 10e-12,
          32e6 * 5e-12);
    TU_EQ_DBL(t.pj_fp_op, 20);
    TU_EQ_DBL(t.pj_int_op, 1);
    TU_EQ_DBL(t.pj_sram_64b, 26);
    TU_EQ_DBL(t.pj_dram_64b, 1200);
    MDC_CHECK(mdc_energy_table_find("horowitz45", &t));
    /* Horowitz 45 nm: fp op (0.9 + 3.7) / 2 = 2.3, int add 0.1, 32 KB SRAM 20, DRAM 1300 */
    check(&t, 1e9 * 2.3e-12, 1e6 * 0.1e-12, 1e6 * 20e-12, 1.6e9 * 3.97e-12, 1e3 * 1300e-12, 8e6 * 1.3e-12,
          16e6 * 10e-12, 32e6 * 5e-12);
    TU_STATUS(mdc_energy_table_find("nosuch", &t), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "nosuch");

    /* a table from JSON */
    char dir[] = "/tmp/minidc-energy-XXXXXX";
    TU_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/t.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"name\": \"mine\", \"pj_int_op\": 2, \"pj_fp_op\": 4, \"pj_sram_64b\": 8, "
               "\"pj_dram_64b\": 16, \"pj_hbm_bit\": 1, \"pj_nvlink_bit\": 0.5, \"pj_net_bit\": 0.25, "
               "\"pj_pcie_bit\": 0.125}\n");
    fclose(f);
    MDC_CHECK(mdc_energy_table_from_json_file(path, &t));
    TU_CHECK(!strcmp(t.name, "mine"), "name %s", t.name);
    check(&t, 1e9 * 4e-12, 1e6 * 2e-12, 1e6 * 8e-12, 1.6e9 * 1e-12, 1e3 * 16e-12, 8e6 * 0.5e-12, 16e6 * 0.25e-12,
          32e6 * 0.125e-12);
    f = fopen(path, "w");
    fprintf(f, "{\"pj_int_op\": 2, \"pj_fp_op\": -4}\n");
    fclose(f);
    TU_STATUS(mdc_energy_table_from_json_file(path, &t), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "pj_fp_op");
    TU_CONTAINS(mdc_detail(), path);
    /* through the options: --energy-table path.json */
    f = fopen(path, "w");
    fprintf(
        f,
        "{\"pj_int_op\": 2, \"pj_fp_op\": 4, \"pj_sram_64b\": 8, \"pj_dram_64b\": 16, "
        "\"pj_hbm_bit\": 1, \"pj_nvlink_bit\": 0.5, \"pj_net_bit\": 0.25, \"pj_pcie_bit\": 0.125, \"pj_extra\": 1}\n");
    fclose(f);
    mdc_device_options o;
    mdc_device_options_default(&o);
    snprintf(o.energy_table, sizeof o.energy_table, "%s", path);
    mdc_device *d = NULL;
    TU_STATUS(mdc_device_create(&d, &o, 0), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "pj_extra");
    remove(path);
    remove(dir);
    return tu_finish("test_device_energy");
}
