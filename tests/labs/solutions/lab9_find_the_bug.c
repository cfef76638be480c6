/* Lab 9's answers for MINIDC_PUZZLE_SEED=1 (tests/cli/labs_cli.sh grades them), found with the
 * page's commands: puzzle 1's reassembly lists rank 1's copy of h.1.attn.c_proj as the odd one;
 * puzzle 2's first wrong element (3456 of 6912) lies in ring chunk 1, which rank 2 sends in the
 * reduce-scatter's first step; puzzle 3's (56) in batch row 0, dp rank 0's; puzzle 4's (864:
 * position 18) in the zigzag chunk 3, held by cp rank 0. */
const char *const lab9_tensor[4] = {"h.1.attn.c_proj", "h.0.attn.c_proj", "h.0.attn.y", "h.0.attn.y"};
const int lab9_rank[4] = {1, 2, 0, 0};
