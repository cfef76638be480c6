/* Lab 9: find the bug (docs/course/lab9-find-the-bug.md).
 *
 * Each puzzle is a minidc training run with one bug planted in it (MINIDC_PUZZLE=K selects puzzle
 * K; the page gives each puzzle's command): a reduction whose result a rank drops, a message
 * corrupted on the wire, a dropout mask drawn with the wrong key, a key/value block the ring
 * attention leaves out. Which block and which rank is drawn from MINIDC_PUZZLE_SEED (your teacher
 * may set it; default 1). Localize each bug with minidc's tools: --dump-dir and minidc compare
 * against a serial run's dump (the first tensor that differs, and the first element), the dump's
 * reassembly (copies that should be equal and are not), --check-replicas, and minidc explain
 * (which rank sends which element of a collective).
 *
 * For each puzzle write down:
 *   lab9_tensor[K-1]: the first tensor that goes wrong, as minidc compare names it without the
 *                     step prefix (e.g. "h.0.mlp.c_fc");
 *   lab9_rank[K-1]:   the rank where the bug is (the rank that drops the reduction, sends the
 *                     corrupted message, draws the wrong mask, leaves the block out).
 *
 * Grade it: make lab N=9 (with the same MINIDC_PUZZLE_SEED as the runs). */
const char *const lab9_tensor[4] = {"?", "?", "?", "?"};
const int lab9_rank[4] = {-1, -1, -1, -1};
