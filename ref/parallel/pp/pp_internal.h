/* Shared by ref/parallel/pp/pp.c (the stage executor) and ref/parallel/pp/pp_timeline.c (its picture). */
#ifndef MINIDC_REF_PP_INTERNAL_H
#define MINIDC_REF_PP_INTERNAL_H

#include "minidc/pp.h"
#include "minidc/train.h"

/* Schedules registered at run time (pp_schedule_user.c): whether `name` is one, and its build
 * (the registered fill on every stage, then mdc_pp_schedule_validate). */
int mdc_pp_i_registered(const char *name);
mdc_status mdc_pp_i_build_registered(mdc_pp_schedule *s, const char *name, int p, int m, int v);

typedef struct {
    mdc_gpt2_acts *a;
    mdc_request *req[2]; /* the forward output's and the input gradient's sends */
    int chunk;           /* the model chunk its layers are */
    int mb;              /* the micro-batch it holds, -1: free */
} pp_set;

/* One action of the last step: kind, micro-batch, chunk, virtual time it started waiting for
 * its input, started computing, ended. */
enum { PP_KIND, PP_MB, PP_CHUNK, PP_WAIT, PP_START, PP_END, PP_REC };

struct mdc_pp {
    mdc_pp_schedule s;
    mdc_group *g;
    int stage, p, nsets;
    int held, held_peak; /* sets holding a micro-batch now, and at most in the last step */
    pp_set *sets;
    int *slot;           /* chunk m + micro-batch -> set */
    size_t floats;       /* one boundary tensor */
    int half;            /* a mixed-precision run's boundary tensors move in 16 bits: 1 bf16, 2 fp16 */
    uint16_t *h16;       /* then their staging: each set's two sends, then one receive (floats halves each) */
    double sent;         /* bytes this stage sent in the last step */
    double busy, t0, t1; /* virtual seconds of the last step's schedule: computing; its start and end */
    double *rec;         /* the last step's actions, PP_REC doubles each */
};

#endif
