/* The minidc subcommands, one file each (tools/cmd_NAME.c). Each gets argv after the
 * subcommand name (argv[0] is the subcommand) and returns the process exit code:
 * 0 ok, 1 failure, 2 bad usage. */
#ifndef MINIDC_TOOLS_COMMANDS_H
#define MINIDC_TOOLS_COMMANDS_H

int mdc_cmd_devices(int argc, char **argv);
int mdc_cmd_bench(int argc, char **argv);
int mdc_cmd_train(int argc, char **argv);
int mdc_cmd_predict(int argc, char **argv); /* tools/cmd_predict.c */
int mdc_cmd_plan(int argc, char **argv);    /* tools/cmd_plan.c */
/* minidc bench train (tools/bench_train.c) */
int mdc_bench_train(int argc, char **argv);
int mdc_cmd_workload(int argc, char **argv);
int mdc_bench_device(int argc, char **argv); /* tools/bench_device.c */
int mdc_cmd_explain(int argc, char **argv);
/* minidc explain block (tools/explain_block.c): one GPT-2 block under tensor parallelism */
int mdc_explain_block(int argc, char **argv);
/* minidc explain exact (tools/explain_exact.c): one gradient element, default mode vs exact mode */
int mdc_explain_exact(int argc, char **argv);
/* minidc explain pipeline (tools/explain_pipeline.c): a pipeline schedule as a grid */
int mdc_explain_pipeline(int argc, char **argv);
/* minidc bench allreduce|reduce_scatter|allgather|alltoall|broadcast (tools/bench_coll.c);
 * argv[0] is the collective's name. */
int mdc_bench_coll(int argc, char **argv);
int mdc_cmd_data(int argc, char **argv);
int mdc_cmd_forward(int argc, char **argv);
int mdc_cmd_compare(int argc, char **argv);

#endif
