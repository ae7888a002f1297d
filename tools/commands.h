/*
 * commands.h: the radixmlp subcommands of tools/, which radixmlp.c dispatches to (with `bench`,
 * bench/cmd_bench.c, declared in bench/cli.h). Each takes the arguments after its name and returns
 * the exit status.
 */
#ifndef RMLP_TOOLS_COMMANDS_H
#define RMLP_TOOLS_COMMANDS_H

int cmd_plan(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif
