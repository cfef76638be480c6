/* The model's positions (ref/model/layers.h, mdc_i_positions). GPT-2's are learned: the table
 * wpe, whose row of each token's global position the embedding adds to the token's row (the
 * ops' embed entries, which also take its gradient); q and k are left as projected. */
#include "model_internal.h"

const mdc_i_positions mdc_i_positions_learned = {"learned", NULL, NULL};
