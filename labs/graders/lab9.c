/* Grader of lab 9 (labs/lab9_find_the_bug.c): the student's answers to the four puzzles against
 * the plants MINIDC_PUZZLE=K makes under MINIDC_PUZZLE_SEED (minidc/fault.h), two checks each: the
 * first tensor that goes wrong (the attention projection's output for a dropped reduction or a
 * corrupted message, the attention's output for a wrong dropout key or a left-out key/value
 * block) and the rank. A wrong answer is told wrong, never corrected. tests/cli/fault_plant_cli.sh
 * checks that minidc compare finds each plant at that tensor.
 * Ranks: 1 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"
#include "minidc/fault.h"

extern const char *const lab9_tensor[4];
extern const int lab9_rank[4];

/* Where plant p first shows in a dump: the tensor minidc compare names first. */
static void site_of(const mdc_plant *p, char *buf, size_t cap) {
    int proj = p->kind == MDC_PLANT_REDUCTION || p->kind == MDC_PLANT_MESSAGE;
    snprintf(buf, cap, "h.%d.attn.%s", p->block, proj ? "c_proj" : "y");
}

int main(int argc, char **argv) {
    grade g;
    mdc_status st = grade_begin(&g, &argc, &argv, 30);
    if (st) {
        fprintf(stderr, "lab 9 grader: %s: %s\n", mdc_strerror(st), mdc_detail());
        return 2;
    }
    unsigned seed = mdc_puzzle_seed();
    for (int k = 1; k <= MDC_PUZZLES; k++) {
        mdc_plant p;
        int ranks = 0;
        char want[32], name[96];
        mdc_puzzle_plant(k, seed, &p, &ranks, NULL);
        site_of(&p, want, sizeof want);
        const char *t = lab9_tensor[k - 1];
        int answered = t && strcmp(t, "?") && *t;
        snprintf(name, sizeof name, "puzzle %d (seed %u, a %s bug): the tensor that goes wrong first", k, seed,
                 mdc_plant_kind_name(p.kind));
        if (!answered)
            grade_check(&g, name, 0, "not answered yet (lab9_tensor[%d] in labs/lab9_find_the_bug.c)", k - 1);
        else
            grade_check(&g, name, !strcmp(t, want),
                        "'%s' is not it: compare the puzzle's dump with a serial one (minidc compare) and take the "
                        "first tensor it says differs, without the step prefix",
                        t);
        snprintf(name, sizeof name, "puzzle %d (seed %u, a %s bug): the rank", k, seed, mdc_plant_kind_name(p.kind));
        int r = lab9_rank[k - 1];
        if (r < 0) grade_check(&g, name, 0, "not answered yet (lab9_rank[%d] in labs/lab9_find_the_bug.c)", k - 1);
        else if (r >= ranks) grade_check(&g, name, 0, "the puzzle runs on ranks 0..%d, not %d", ranks - 1, r);
        else
            grade_check(&g, name, r == p.rank,
                        "rank %d is not it: which rank's rows, positions or message does the first wrong element "
                        "belong to?",
                        r);
    }
    return grade_end(&g);
}
