/* Pipeline schedules registered at run time (include/minidc/pp.h: mdc_pp_schedule_register): a
 * fill function per name, called for every stage; the result is validated like a built-in
 * schedule's, so nothing downstream (the stage executor, explain, the timeline) can tell. */
#include <stdlib.h>
#include <string.h>

#include "minidc/model.h"
#include "pp_internal.h"

#define MAX_USER 8

typedef struct {
    char name[16], like[16];
    int split;
    mdc_status (*fill)(mdc_pp_schedule *s, int stage);
} user_schedule;

static user_schedule users[MAX_USER];
static int n_users;

static const user_schedule *find(const char *name) {
    for (int i = 0; i < n_users; i++)
        if (!strcmp(users[i].name, name)) return &users[i];
    return NULL;
}

int mdc_pp_i_registered(const char *name) { return find(name) != NULL; }

mdc_status mdc_pp_schedule_register(const char *name, const char *like, int split,
                                    mdc_status (*fill)(mdc_pp_schedule *s, int stage)) {
    static const char *const builtin[] = {"gpipe", "1f1b", "interleaved", "zb-h1"};
    if (!name || !*name || strlen(name) >= sizeof users[0].name || !fill)
        return mdc_fail(MDC_ERR_INVALID, "mdc_pp_schedule_register: needs a name of 1 to %zu characters and a fill",
                        sizeof users[0].name - 1);
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, builtin[i]) || find(name))
            return mdc_fail(MDC_ERR_INVALID, "mdc_pp_schedule_register: schedule '%s' exists", name);
    if (like && strcmp(like, "gpipe") && strcmp(like, "1f1b"))
        return mdc_fail(MDC_ERR_INVALID, "mdc_pp_schedule_register: like '%s': gpipe or 1f1b", like);
    if (n_users == MAX_USER)
        return mdc_fail(MDC_ERR_INVALID, "mdc_pp_schedule_register: at most %d schedules", MAX_USER);
    user_schedule *u = &users[n_users++];
    snprintf(u->name, sizeof u->name, "%s", name);
    snprintf(u->like, sizeof u->like, "%s", like ? like : "1f1b");
    u->split = split != 0;
    u->fill = fill;
    return MDC_OK;
}

mdc_status mdc_pp_i_build_registered(mdc_pp_schedule *s, const char *name, int p, int m, int v) {
    const user_schedule *u = find(name);
    if (v < 1 || v > MDC_GPT2_MAX_CHUNKS)
        return mdc_fail(MDC_ERR_INVALID, "--virtual-stages %d: 1 to %d model chunks per stage", v, MDC_GPT2_MAX_CHUNKS);
    snprintf(s->name, sizeof s->name, "%s", u->name);
    snprintf(s->like, sizeof s->like, "%s", u->like);
    s->p = p, s->m = m, s->v = v, s->split = u->split;
    s->n = calloc((size_t)p, sizeof(int)), s->a = calloc((size_t)p, sizeof(mdc_pp_action *));
    mdc_status st = s->n && s->a ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "pipeline schedule %s", name);
    for (int q = 0; q < p && !st; q++) st = u->fill(s, q);
    if (!st) st = mdc_pp_schedule_validate(s);
    if (st) mdc_pp_schedule_free(s);
    return st;
}
