/* minidc data: make and inspect token shards.
 *   minidc data tokenize IN.txt OUT.bin            character tokenizer (vocab in OUT.bin.vocab.json)
 *   minidc data generate TASK --seed S --tokens N OUT.bin
 *   minidc data info FILE.bin [--show K]           header, vocabulary, first K tokens decoded
 *   minidc data tasks                              the generated tasks */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "minidc/datasets.h"
#include "minidc/tensorfile.h"

static void usage(FILE *f) {
    fprintf(f, "usage: minidc data tokenize IN.txt OUT.bin\n"
               "       minidc data generate TASK [--seed S] [--tokens N] OUT.bin\n"
               "       minidc data info FILE.bin [--show K]\n"
               "       minidc data tasks\n"
               "Token shards and vocabularies: docs/datasets.md\n");
}

static int fail(mdc_status st) {
    fprintf(stderr, "minidc data: %s: %s\n", mdc_strerror(st), mdc_detail());
    return 1;
}

static int cmd_tokenize(int argc, char **argv) {
    if (argc != 3) {
        usage(stderr);
        return 2;
    }
    unsigned char *buf;
    size_t len;
    mdc_shard s;
    mdc_status st = mdc_read_file(argv[1], (size_t)1 << 32, &buf, &len);
    if (st) return fail(st);
    st = mdc_tokenize_chars(buf, len, argv[1], &s);
    free(buf);
    if (st) return fail(st);
    st = mdc_shard_write(argv[2], &s);
    if (!st)
        printf("%s: %zu tokens, vocab %u, %d-byte tokens; vocabulary in %s.vocab.json\n", argv[2], s.count,
               s.vocab_size, s.vocab_size <= 65536 ? 2 : 4, argv[2]);
    mdc_shard_clear(&s);
    return st ? fail(st) : 0;
}

static int cmd_generate(int argc, char **argv) {
    const char *task = NULL, *out = NULL;
    long long seed = 1, ntok = 1000000;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--seed") || !strcmp(argv[i], "--tokens")) && i + 1 < argc) {
            long long v;
            /* --tokens: at most 2^32, as datasets/tasks.c allows (the tokenizer's 4 GiB input). */
            int tok = !strcmp(argv[i], "--tokens");
            if (!mdc_arg_ll("data", argv[i], argv[i + 1], tok, tok ? 1LL << 32 : LLONG_MAX, &v)) return 2;
            if (!strcmp(argv[i], "--seed")) seed = v;
            else ntok = v;
            i++;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "minidc data generate: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (!task) task = argv[i];
        else if (!out) out = argv[i];
        else {
            usage(stderr);
            return 2;
        }
    }
    if (!task || !out || ntok == 0) {
        usage(stderr);
        return 2;
    }
    mdc_shard s;
    double floor_nats;
    mdc_status st = mdc_task_generate(task, (uint64_t)seed, (size_t)ntok, &s, &floor_nats);
    if (st == MDC_ERR_INVALID) {
        fprintf(stderr, "minidc data generate: %s\n", mdc_detail());
        return 2;
    }
    if (st) return fail(st);
    st = mdc_shard_write(out, &s);
    if (!st)
        printf("%s: task %s, seed %lld, %zu tokens, vocab %u; entropy floor %.4f nats/token "
               "(the loss of a model that solved it)\n",
               out, task, seed, s.count, s.vocab_size, floor_nats);
    mdc_shard_clear(&s);
    return st ? fail(st) : 0;
}

/* Prints a token's text with \n and other control characters escaped. */
static void put_token(const char *t) {
    for (; *t; t++) {
        if (*t == '\n') fputs("\\n", stdout);
        else if (*t == '\t') fputs("\\t", stdout);
        else if ((unsigned char)*t < 0x20) printf("\\x%02x", (unsigned char)*t);
        else putchar(*t);
    }
}

static int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    long long show = 64;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--show") && i + 1 < argc) {
            if (!mdc_arg_ll("data", "--show", argv[++i], 0, LLONG_MAX, &show)) return 2;
        } else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            usage(stderr);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    mdc_shard s;
    mdc_status st = mdc_shard_read(path, &s);
    if (st) return fail(st);
    printf("file:        %s\n", path);
    printf("format:      minidc token shard v%d, %d-byte tokens\n", MDC_SHARD_VERSION, s.width);
    printf("source:      %s\n", s.source[0] ? s.source : "(none)");
    printf("tokens:      %zu\n", s.count);
    printf("vocab size:  %u%s\n", s.vocab_size, s.vocab ? "" : " (no .vocab.json next to it)");
    if (s.vocab && s.vocab_size <= 128) {
        printf("vocabulary:  ");
        for (uint32_t v = 0; v < s.vocab_size; v++) {
            printf("%s%u='", v ? " " : "", v);
            put_token(s.vocab[v]);
            putchar('\'');
        }
        putchar('\n');
    }
    size_t n = (size_t)show < s.count ? (size_t)show : s.count;
    if (n) {
        printf("first %zu:    ", n);
        for (size_t i = 0; i < n; i++) {
            if (s.vocab) put_token(s.vocab[s.tokens[i]]);
            else printf("%s%u", i ? " " : "", s.tokens[i]);
        }
        putchar('\n');
    }
    mdc_shard_clear(&s);
    return 0;
}

int mdc_cmd_data(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(argv[1], "generate")) return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "tasks")) {
        for (int i = 0; i < mdc_task_count(); i++)
            printf("%-8s %s\n", mdc_task_at(i)->name, mdc_task_at(i)->description);
        return 0;
    }
    fprintf(stderr, "minidc data: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
