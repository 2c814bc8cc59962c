/* differential_seq.c -- the differential's scripted run of sequence steps
 * (docs/sessions.md): one script of starts, steps, ends and refusals, sent
 * in the same order to the old and the new server, each answer compared as
 * the golden ones are (tests/differential.h), Retry-After too.
 *
 * The script is data: each step names its protocol (POST /attention, v2
 * infer with JSON data, or v2 with binary data and binary outputs), its
 * model, up to two extra header lines and a body template. Ids are fixed
 * and distinct per scenario, and nothing waits on a clock, so the answers
 * do not depend on timing. The first part runs on the servers the goldens
 * ran on (default limits, the test models); the second on a pair started
 * with small limits (--max-sequences 2, --max-sequence-bytes 1536K), for an
 * eviction, 413s, and 503s with Retry-After while two starts' answers are
 * held unread on slow connections. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/differential.h"
#include "tests/support/golden_v2.h"

/* ---------------------------------------------------------------------- */
/* The script                                                              */

enum seq_kind {
    SEQ_ATT,  /* POST /attention */
    SEQ_V2,   /* v2 infer, JSON data */
    SEQ_V2B,  /* v2 infer, binary data and binary outputs */
    SEQ_HOLD, /* POST /attention on a slow connection, its answer left unread */
    SEQ_DRAIN /* read the held answers, and compare them */
};

struct seq_step {
    const char *what;
    enum seq_kind kind;
    const char *model;   /* v2: the URL's model; NULL: attention */
    const char *hdr[3];  /* extra header lines, NULL-terminated */
    const char *body;    /* a template (expand below) */
};

/* A body template is JSON written with ' for ", and these, whose numbers
 * (multiples of 1/8 in [-1, 1], exact in FP16 and BF16) differ from one
 * use to the next:
 *   #M(r,w)       an r x w matrix as nested arrays
 *   #I(name,r,w)  a v2 FP32 input of shape [r, w], its data flat
 *   #X(n)         n letters x (an overlong id) */
#define ATT(what, ...) {what, SEQ_ATT, NULL, {NULL}, __VA_ARGS__}
#define ATT_H(what, h1, h2, ...) {what, SEQ_ATT, NULL, {h1, h2, NULL}, __VA_ARGS__}
#define V2(what, model, ...) {what, SEQ_V2, model, {NULL}, __VA_ARGS__}
#define V2B(what, model, ...) {what, SEQ_V2B, model, {NULL}, __VA_ARGS__}
#define V2_H(what, kind, model, h1, h2, ...) {what, kind, model, {h1, h2, NULL}, __VA_ARGS__}

#define W_BUILTIN "'weights':{'in_proj_weight':#M(12,4),'out_proj_weight':#M(4,4)}"
#define HID(id) "X-Sequence-Id: " id

static const struct seq_step script[] = {
    /* POST /attention, the built-in model: weights kept by the start */
    ATT("start, weights, FP32, rope", "{'sequence_id':'dsq-a','sequence_start':true,"
        "'kv_cache_dtype':'FP32','num_heads':2,'rope':{'style':'half'},'query':#M(3,4),"
        W_BUILTIN "}"),
    ATT("step of 1", "{'sequence_id':'dsq-a','num_heads':2,'query':#M(1,4),'need_weights':false}"),
    ATT("step of 1, weights", "{'sequence_id':'dsq-a','num_heads':2,'query':#M(1,4),"
        "'need_weights':true}"),
    ATT("chunk: 2 queries, 3 keys", "{'sequence_id':'dsq-a','num_heads':2,'query':#M(2,4),"
        "'key':#M(3,4),'value':#M(3,4)}"),
    ATT_H("X-Sequence-Id alone", HID("dsq-a"), NULL, "{'num_heads':2,'query':#M(1,4)}"),
    ATT_H("X-Sequence-Id and the same id", HID("dsq-a"), NULL,
          "{'sequence_id':'dsq-a','num_heads':2,'query':#M(1,4)}"),
    ATT_H("X-Sequence-Id differs", HID("dsq-other"), NULL,
          "{'sequence_id':'dsq-a','num_heads':2,'query':#M(1,4)}"),
    ATT_H("two X-Sequence-Id", HID("dsq-a"), HID("dsq-a"), "{'num_heads':2,'query':#M(1,4)}"),
    ATT("num_heads differs", "{'sequence_id':'dsq-a','num_heads':1,'query':#M(1,4)}"),
    ATT("query wider than the start", "{'sequence_id':'dsq-a','num_heads':2,'query':#M(1,8)}"),
    ATT("weights differ", "{'sequence_id':'dsq-a','num_heads':2,'query':#M(1,4),"
        "'weights':{'out_proj_weight':#M(4,4)}}"),
    ATT("key_padding_mask of the wrong length", "{'sequence_id':'dsq-a','num_heads':2,"
        "'query':#M(1,4),'key_padding_mask':[false,false,true]}"),
    ATT("key_padding_mask over the cache", "{'sequence_id':'dsq-a','num_heads':2,"
        "'query':#M(1,4),'key_padding_mask':[true,false,false,false,false,false,false,false,"
        "false,false,false]}"),
    ATT("another model", "{'sequence_id':'dsq-a','model':'mha_f32','query':#M(1,16)}"),
    ATT("query_position_offset", "{'sequence_id':'dsq-a','num_heads':2,'query':#M(1,4),"
        "'query_position_offset':3}"),
    ATT("positional_encoding", "{'sequence_id':'dsq-a','num_heads':2,'query':#M(1,4),"
        "'positional_encoding':'sinusoidal'}"),
    ATT("S < L", "{'sequence_id':'dsq-a','num_heads':2,'query':#M(2,4),'key':#M(1,4),"
        "'value':#M(1,4)}"),
    ATT("end with a step", "{'sequence_id':'dsq-a','num_heads':2,'query':#M(1,4),"
        "'sequence_end':true}"),
    ATT("step of an ended id", "{'sequence_id':'dsq-a','num_heads':2,'query':#M(1,4)}"),
    ATT("end-only of an ended id", "{'sequence_id':'dsq-a','sequence_end':true}"),
    /* FP16: a value beyond its range is refused, the sequence kept */
    ATT("start FP16", "{'sequence_id':'dsq-h','sequence_start':true,'kv_cache_dtype':'FP16',"
        "'num_heads':1,'query':#M(2,4),'key':#M(2,4),'value':#M(2,4)}"),
    ATT("step FP16", "{'sequence_id':'dsq-h','num_heads':1,'query':#M(1,4)}"),
    ATT("key beyond FP16", "{'sequence_id':'dsq-h','num_heads':1,'query':#M(1,4),"
        "'key':[[0,1e5,0,1]],'value':#M(1,4)}"),
    ATT("step after the refusal", "{'sequence_id':'dsq-h','num_heads':1,'query':#M(1,4)}"),
    ATT("end-only", "{'sequence_id':'dsq-h','sequence_end':true}"),
    /* BF16 with an integer id, stepped over both protocols */
    ATT("start BF16, integer id", "{'sequence_id':4242,'sequence_start':true,"
        "'kv_cache_dtype':'BF16','num_heads':2,'query':#M(4,4)}"),
    ATT_H("header and id as text", HID("4242"), NULL,
          "{'sequence_id':'4242','num_heads':2,'query':#M(1,4)}"),
    V2("the same id over v2", NULL, "{'parameters':{'sequence_id':4242,'num_heads':2},"
       "'inputs':[#I(query,1,4)]}"),
    ATT("2 rows, weights", "{'sequence_id':4242,'num_heads':2,'query':#M(2,4),"
        "'need_weights':true,'average_attn_weights':false}"),
    ATT("end with a step", "{'sequence_id':4242,'num_heads':2,'query':#M(1,4),"
        "'sequence_end':true}"),
    /* a restart of a live id; a refused restart keeps the live one */
    ATT("start", "{'sequence_id':'dsq-r','sequence_start':true,'num_heads':2,'query':#M(2,4)}"),
    ATT("step", "{'sequence_id':'dsq-r','num_heads':2,'query':#M(1,4)}"),
    ATT("restart", "{'sequence_id':'dsq-r','sequence_start':true,'num_heads':2,'query':#M(1,4)}"),
    ATT("step after the restart", "{'sequence_id':'dsq-r','num_heads':2,'query':#M(1,4)}"),
    ATT("refused restart", "{'sequence_id':'dsq-r','sequence_start':true,'num_heads':2,"
        "'query':#M(1,4),'key':#M(1,5)}"),
    ATT("step after it", "{'sequence_id':'dsq-r','num_heads':2,'query':#M(1,4)}"),
    ATT("end-only", "{'sequence_id':'dsq-r','sequence_end':true}"),
    /* ids and options that are refused */
    ATT("unknown id", "{'sequence_id':'dsq-never','num_heads':2,'query':#M(1,4)}"),
    ATT("unknown integer id", "{'sequence_id':77,'num_heads':2,'query':#M(1,4)}"),
    ATT("end-only of an unknown id", "{'sequence_id':'dsq-never','sequence_end':true}"),
    ATT("id 1.5", "{'sequence_id':1.5,'sequence_start':true,'num_heads':2,'query':#M(1,4)}"),
    ATT("id true", "{'sequence_id':true,'sequence_start':true,'num_heads':2,'query':#M(1,4)}"),
    ATT("id [1]", "{'sequence_id':[1],'sequence_start':true,'num_heads':2,'query':#M(1,4)}"),
    ATT("id -1", "{'sequence_id':-1,'sequence_start':true,'num_heads':2,'query':#M(1,4)}"),
    ATT("id 2^64", "{'sequence_id':18446744073709551616,'sequence_start':true,'num_heads':2,"
        "'query':#M(1,4)}"),
    ATT("id of 129 letters", "{'sequence_id':'#X(129)','sequence_start':true,'num_heads':2,"
        "'query':#M(1,4)}"),
    ATT("id with a space", "{'sequence_id':'a b','sequence_start':true,'num_heads':2,"
        "'query':#M(1,4)}"),
    ATT("start without an id", "{'sequence_start':true,'num_heads':2,'query':#M(1,4)}"),
    ATT("sequence_start 'yes'", "{'sequence_id':'dsq-t','sequence_start':'yes','num_heads':2,"
        "'query':#M(1,4)}"),
    ATT("sequence_end 1", "{'sequence_id':'dsq-t','sequence_end':1}"),
    ATT("kv_cache_dtype outside a sequence", "{'kv_cache_dtype':'FP16','num_heads':2,"
        "'query':#M(1,4)}"),
    ATT("kv_cache_dtype FP8", "{'sequence_id':'dsq-t','sequence_start':true,"
        "'kv_cache_dtype':'FP8','num_heads':2,'query':#M(1,4)}"),
    ATT("kv_cache_dtype 16", "{'sequence_id':'dsq-t','sequence_start':true,"
        "'kv_cache_dtype':16,'num_heads':2,'query':#M(1,4)}"),
    ATT("step of the refused starts' id", "{'sequence_id':'dsq-t','num_heads':2,"
        "'query':#M(1,4)}"),
    /* POST /attention, served models: GQA and RoPE (llama_l1), plain MHA */
    ATT("llama_l1 start", "{'model':'llama_l1','sequence_id':'dsq-l','sequence_start':true,"
        "'query':#M(3,32)}"),
    ATT("llama_l1 step of 1", "{'model':'llama_l1','sequence_id':'dsq-l','query':#M(1,32)}"),
    ATT("llama_l1 chunk", "{'model':'llama_l1','sequence_id':'dsq-l','query':#M(2,32),"
        "'key':#M(4,32),'value':#M(4,32),'need_weights':true}"),
    ATT("llama_l1 num_kv_heads differs", "{'model':'llama_l1','sequence_id':'dsq-l',"
        "'num_kv_heads':4,'query':#M(1,32)}"),
    ATT("llama_l1 without the model", "{'sequence_id':'dsq-l','num_heads':4,'query':#M(1,32)}"),
    ATT("llama_l1 end with a step", "{'model':'llama_l1','sequence_id':'dsq-l',"
        "'query':#M(1,32),'sequence_end':true}"),
    ATT("digits-reverse start (positional_encoding)", "{'model':'digits-reverse',"
        "'sequence_id':'dsq-d','sequence_start':true,'query':#M(1,32)}"),
    ATT("mha_f32 start FP16", "{'model':'mha_f32','sequence_id':'dsq-m','sequence_start':true,"
        "'kv_cache_dtype':'FP16','query':#M(2,16)}"),
    ATT("mha_f32 step", "{'model':'mha_f32','sequence_id':'dsq-m','query':#M(1,16)}"),
    ATT("mha_f32 end-only", "{'sequence_id':'dsq-m','sequence_end':true}"),
    /* v2, the built-in model: integer id, weights as inputs */
    V2("v2 start FP16, weights", NULL, "{'parameters':{'num_heads':2,'sequence_id':9137712000123,"
       "'sequence_start':true,'kv_cache_dtype':'FP16'},'inputs':[#I(query,2,4),"
       "#I(in_proj_weight,12,4)]}"),
    V2B("v2 step of 1", NULL, "{'parameters':{'num_heads':2,'sequence_id':9137712000123},"
        "'inputs':[#I(query,1,4)]}"),
    V2("v2 chunk, weights", NULL, "{'parameters':{'num_heads':2,'sequence_id':9137712000123,"
       "'need_weights':true},'inputs':[#I(query,2,4),#I(key,3,4),#I(value,3,4)]}"),
    V2_H("v2 X-Sequence-Id alone", SEQ_V2B, NULL, HID("9137712000123"), NULL,
         "{'parameters':{'num_heads':2},'inputs':[#I(query,1,4)]}"),
    V2_H("v2 two X-Sequence-Id", SEQ_V2, NULL, HID("9137712000123"), HID("9137712000123"),
         "{'parameters':{'num_heads':2},'inputs':[#I(query,1,4)]}"),
    V2("v2 query_position_offset", NULL, "{'parameters':{'num_heads':2,"
       "'sequence_id':9137712000123,'query_position_offset':1},'inputs':[#I(query,1,4)]}"),
    V2B("v2 end with a step", NULL, "{'parameters':{'num_heads':2,'sequence_id':9137712000123,"
        "'sequence_end':true},'inputs':[#I(query,1,4)]}"),
    V2("v2 step of an ended id", NULL, "{'parameters':{'num_heads':2,"
       "'sequence_id':9137712000123},'inputs':[#I(query,1,4)]}"),
    V2("v2 end-only of an ended id", NULL, "{'parameters':{'sequence_id':9137712000123,"
       "'sequence_end':true}}"),
    V2("v2 unknown id", NULL, "{'parameters':{'num_heads':2,'sequence_id':'dsq-v-never'},"
       "'inputs':[#I(query,1,4)]}"),
    V2("v2 id 1.5", NULL, "{'parameters':{'num_heads':2,'sequence_id':1.5,'sequence_start':true},"
       "'inputs':[#I(query,1,4)]}"),
    V2("v2 id true", NULL, "{'parameters':{'num_heads':2,'sequence_id':true,"
       "'sequence_start':true},'inputs':[#I(query,1,4)]}"),
    V2("v2 id -5", NULL, "{'parameters':{'num_heads':2,'sequence_id':-5,'sequence_start':true},"
       "'inputs':[#I(query,1,4)]}"),
    V2("v2 kv_cache_dtype bf16", NULL, "{'parameters':{'num_heads':2,'sequence_id':'dsq-v-t',"
       "'sequence_start':true,'kv_cache_dtype':'bf16'},'inputs':[#I(query,1,4)]}"),
    V2("v2 sequence_end 'true'", NULL, "{'parameters':{'num_heads':2,"
       "'sequence_id':'dsq-v-t','sequence_end':'true'}}"),
    /* v2, llama_l1 (GQA, RoPE), BF16 */
    V2("llama_l1 start BF16", "llama_l1", "{'parameters':{'sequence_id':'dsq-vl',"
       "'sequence_start':true,'kv_cache_dtype':'BF16'},'inputs':[#I(query,3,32),#I(key,3,32),"
       "#I(value,3,32)]}"),
    V2B("llama_l1 step of 1", "llama_l1", "{'parameters':{'sequence_id':'dsq-vl'},"
        "'inputs':[#I(query,1,32)]}"),
    V2B("llama_l1 chunk, weights", "llama_l1", "{'parameters':{'sequence_id':'dsq-vl',"
        "'need_weights':true},'inputs':[#I(query,2,32),#I(key,4,32),#I(value,4,32)]}"),
    V2("llama_l1 query narrower", "llama_l1", "{'parameters':{'sequence_id':'dsq-vl'},"
       "'inputs':[#I(query,1,16)]}"),
    V2("llama_l1 key_padding_mask of the wrong length", "llama_l1",
       "{'parameters':{'sequence_id':'dsq-vl'},'inputs':[#I(query,1,32),{'name':"
       "'key_padding_mask','datatype':'BOOL','shape':[2],'data':[false,false]}]}"),
    V2B("llama_l1 key_padding_mask over the cache", "llama_l1",
        "{'parameters':{'sequence_id':'dsq-vl'},'inputs':[#I(query,1,32),{'name':"
        "'key_padding_mask','datatype':'BOOL','shape':[9],'data':[true,false,false,false,"
        "false,false,false,false,false]}]}"),
    V2("llama_l1 id to another model", "mha_f32", "{'parameters':{'sequence_id':'dsq-vl'},"
       "'inputs':[#I(query,1,16)]}"),
    V2("llama_l1 end-only", "llama_l1", "{'parameters':{'sequence_id':'dsq-vl',"
       "'sequence_end':true}}"),
    V2("llama_l1 end-only again", "llama_l1", "{'parameters':{'sequence_id':'dsq-vl',"
       "'sequence_end':true}}"),
    /* v2, mistral_l0 (GQA, RoPE, window), FP16: beyond its range, a restart */
    V2("mistral_l0 start FP16", "mistral_l0", "{'parameters':{'sequence_id':'dsq-vm',"
       "'sequence_start':true,'kv_cache_dtype':'FP16'},'inputs':[#I(query,2,32)]}"),
    V2("mistral_l0 key beyond FP16", "mistral_l0", "{'parameters':{'sequence_id':'dsq-vm'},"
       "'inputs':[#I(query,1,32),{'name':'key','datatype':'FP32','shape':[1,32],'data':[1e6,"
       "1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,"
       "1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6,1e6]},#I(value,1,32)]}"),
    V2B("mistral_l0 step of 1", "mistral_l0", "{'parameters':{'sequence_id':'dsq-vm'},"
        "'inputs':[#I(query,1,32)]}"),
    V2_H("mistral_l0 restart by header", SEQ_V2B, "mistral_l0", HID("dsq-vm"), NULL,
         "{'parameters':{'sequence_start':true,'kv_cache_dtype':'FP16'},"
         "'inputs':[#I(query,1,32)]}"),
    V2("mistral_l0 end with a step", "mistral_l0", "{'parameters':{'sequence_id':'dsq-vm',"
       "'sequence_end':true},'inputs':[#I(query,2,32),#I(key,2,32),#I(value,2,32)]}"),
    /* v2, gemma2_l0 (soft-cap, window, head_dim 12) */
    V2("gemma2_l0 start", "gemma2_l0", "{'parameters':{'sequence_id':'dsq-vg',"
       "'sequence_start':true},'inputs':[#I(query,3,32)]}"),
    V2B("gemma2_l0 step", "gemma2_l0", "{'parameters':{'sequence_id':'dsq-vg'},"
        "'inputs':[#I(query,1,32)]}"),
    V2B("gemma2_l0 end with a step", "gemma2_l0", "{'parameters':{'sequence_id':'dsq-vg',"
        "'sequence_end':true},'inputs':[#I(query,1,32)]}"),
};

/* With --max-sequences 2 --max-sequence-bytes 1536K: one block of a
 * 512-wide head (1 MiB) fits, two never do. */
static const struct seq_step limits[] = {
    ATT("start a", "{'sequence_id':'lim-a','sequence_start':true,'num_heads':2,'query':#M(1,4)}"),
    ATT("start b", "{'sequence_id':'lim-b','sequence_start':true,'num_heads':2,'query':#M(1,4)}"),
    ATT("start c evicts a", "{'sequence_id':'lim-c','sequence_start':true,'num_heads':2,"
        "'query':#M(1,4)}"),
    ATT("step of evicted a", "{'sequence_id':'lim-a','num_heads':2,'query':#M(1,4)}"),
    ATT("step of b", "{'sequence_id':'lim-b','num_heads':2,'query':#M(1,4)}"),
    ATT("a start that never fits: 413", "{'sequence_id':'lim-huge','sequence_start':true,"
        "'num_heads':1,'need_weights':false,'query':#M(300,512)}"),
    ATT("start big (evicts c)", "{'sequence_id':'lim-big','sequence_start':true,'num_heads':1,"
        "'need_weights':false,'query':#M(200,512)}"),
    ATT("a step past the budget: 413", "{'sequence_id':'lim-big','num_heads':1,"
        "'need_weights':false,'query':#M(100,512)}"),
    V2B("v2 step past the budget: 413", NULL, "{'parameters':{'sequence_id':'lim-big',"
        "'num_heads':1,'need_weights':false},'inputs':[#I(query,100,512)]}"),
    ATT("a step that fits", "{'sequence_id':'lim-big','num_heads':1,'need_weights':false,"
        "'query':#M(56,512)}"),
    ATT("end-only big", "{'sequence_id':'lim-big','sequence_end':true}"),
    ATT("end-only b", "{'sequence_id':'lim-b','sequence_end':true}"),
    {"held start 1", SEQ_HOLD, NULL, {NULL}, "{'sequence_id':'lim-held-1','sequence_start':true,"
     "'num_heads':2,'need_weights':true,'query':#M(1024,4)}"},
    {"held start 2", SEQ_HOLD, NULL, {NULL}, "{'sequence_id':'lim-held-2','sequence_start':true,"
     "'num_heads':2,'need_weights':true,'query':#M(1024,4)}"},
    ATT("start while both are held: 503", "{'sequence_id':'lim-other','sequence_start':true,"
        "'num_heads':2,'query':#M(1,4)}"),
    V2("v2 start while both are held: 503", NULL, "{'parameters':{'num_heads':2,"
       "'sequence_id':'lim-other','sequence_start':true},'inputs':[#I(query,1,4)]}"),
    {"the held answers", SEQ_DRAIN, NULL, {NULL}, NULL},
    ATT("step of held 1", "{'sequence_id':'lim-held-1','num_heads':2,'query':#M(1,4)}"),
    ATT("start other (evicts held 2)", "{'sequence_id':'lim-other','sequence_start':true,"
        "'num_heads':2,'query':#M(1,4)}"),
    ATT("step of held 2", "{'sequence_id':'lim-held-2','num_heads':2,'query':#M(1,4)}"),
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------------- */
/* Bodies                                                                  */

static unsigned salt; /* one more for each matrix: the data differ per step */

/* r x w numbers, nested by rows or flat. */
static void matrix(FILE *f, int r, int w, int nested)
{
    fputc('[', f);
    for (int i = 0; i < r; i++) {
        if (nested)
            fputs(i ? ",[" : "[", f);
        for (int j = 0; j < w; j++) {
            const unsigned k = (unsigned)(i * w + j) * 5u + salt * 3u;
            const int sep = nested ? j > 0 : i > 0 || j > 0;
            fprintf(f, "%s%g", sep ? "," : "", (double)((int)(k % 17u) - 8) / 8.0);
        }
        if (nested)
            fputc(']', f);
    }
    fputc(']', f);
    salt++;
}

/* The use of a macro at p ("#M(3,4)", "#I(query,3,4)", "#X(5)"): the
 * input's name (#I) into name, the numbers into v; its length, or 0 when p
 * holds none. */
static size_t macro(const char *p, char *name, size_t nlen, int v[2])
{
    if (p[0] != '#' || p[1] == '\0' || !strchr("MIX", p[1]) || p[2] != '(')
        return 0;
    const char *q = p + 3;
    if (p[1] == 'I') {
        const size_t k = strcspn(q, ",)");
        if (q[k] != ',' || k >= nlen)
            return 0;
        memcpy(name, q, k);
        name[k] = '\0';
        q += k + 1;
    }
    const int want = p[1] == 'X' ? 1 : 2;
    for (int i = 0; i < want; i++) {
        char *end;
        const long x = strtol(q, &end, 10);
        if (end == q || x < 0 || x > 1 << 20 || *end != (i + 1 < want ? ',' : ')'))
            return 0;
        v[i] = (int)x;
        q = end + 1;
    }
    return (size_t)(q - p);
}

/* The body of template t (see above), malloc'd; its length in *len. */
static char *expand(const char *t, size_t *len)
{
    char *s = NULL, name[32];
    FILE *f = open_memstream(&s, len);
    for (const char *p = t; *p; p++) {
        int v[2];
        const size_t used = macro(p, name, sizeof name, v);
        if (*p == '\'') {
            fputc('"', f);
        } else if (used == 0) {
            fputc(*p, f);
        } else if (p[1] == 'M') {
            matrix(f, v[0], v[1], 1);
        } else if (p[1] == 'X') {
            for (int i = 0; i < v[0]; i++)
                fputc('x', f);
        } else {
            fprintf(f, "{\"name\":\"%s\",\"datatype\":\"FP32\",\"shape\":[%d,%d],\"data\":",
                    name, v[0], v[1]);
            matrix(f, v[0], v[1], 0);
            fputc('}', f);
        }
        if (used)
            p += used - 1;
    }
    fclose(f);
    return s;
}

/* ---------------------------------------------------------------------- */
/* Answers held unread                                                     */

/* A start whose answer (the weights of 1024 x 1024 keys, ~20 MB of JSON)
 * cannot fit the socket buffers, sent to each server on a connection with
 * a small receive buffer until its first byte arrives: that answer is being
 * sent, and its sequence in use, until a SEQ_DRAIN step reads it all. */
static struct {
    int fd[2];
    char label[200];
} held[4];
static int nheld;

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

static int hold_one(int port, const char *body, size_t len)
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0), rcvbuf = 4096;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char head[256], c;
    const int n = snprintf(head, sizeof head, "POST /attention HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                           "Connection: close\r\n\r\n", len);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) ||
        connect(fd, (struct sockaddr *)&sa, sizeof sa) || send_all(fd, head, (size_t)n) ||
        send_all(fd, body, len) || recv(fd, &c, 1, MSG_PEEK) != 1) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* The whole answer on fd (until the server closes it), as a reply; status
 * -1 when there is none. */
static struct http_reply read_held(int fd)
{
    struct http_reply a = {.status = -1};
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (ssize_t k = 1; fd >= 0 && k > 0; n += (size_t)k) {
        if (cap - n < 65536) {
            char *nb = realloc(buf, cap = cap * 2 + 65536);
            if (!nb)
                break;
            buf = nb;
        }
        k = recv(fd, buf + n, cap - n - 1, 0);
        if (k < 0)
            k = 0;
    }
    if (fd >= 0)
        close(fd);
    if (buf)
        buf[n] = '\0'; /* the answer is text: its headers, and JSON */
    const char *end = buf ? strstr(buf, "\r\n\r\n") : NULL;
    if (end && n > 12) {
        a.status = strtol(buf + 9, NULL, 10);
        a.hlen = (size_t)(end + 2 - buf) < sizeof a.headers - 1 ? (size_t)(end + 2 - buf)
                                                                : sizeof a.headers - 1;
        memcpy(a.headers, buf, a.hlen);
        a.len = n - (size_t)(end + 4 - buf);
        a.body = malloc(a.len + 1);
        memcpy(a.body, end + 4, a.len);
        a.body[a.len] = '\0';
    }
    free(buf);
    return a;
}

/* ---------------------------------------------------------------------- */
/* Running the script                                                      */

static int tally[4]; /* the new server's 400s, 413s, 503s, others not 200 */

static void count(long status)
{
    if (status != 200)
        tally[status == 400 ? 0 : status == 413 ? 1 : status == 503 ? 2 : 3]++;
}

/* Send steps in order, to both servers; 0, or -1 when the script could not
 * be followed (a template that is not JSON, an answer that could not be
 * held). */
static int run(const char *part, const struct seq_step *steps, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const struct seq_step *s = &steps[i];
        char label[200], path[128];
        snprintf(label, sizeof label, "sequence %s %zu: %s", part, i + 1, s->what);
        if (s->kind == SEQ_DRAIN) {
            for (int h = 0; h < nheld; h++) {
                struct http_reply a[2] = {read_held(held[h].fd[0]), read_held(held[h].fd[1])};
                diff_answers(held[h].label, "/attention", a);
                count(a[1].status);
                free(a[0].body), free(a[1].body);
            }
            nheld = 0;
            continue;
        }
        size_t len;
        char *body = expand(s->body, &len);
        json_error_t e;
        json_t *j = json_loadb(body, len, s->kind == SEQ_V2B ? 0 : JSON_DECODE_INT_AS_REAL, &e);
        if (!j) {
            fprintf(stderr, "differential: %s: not JSON: %s\n", label, e.text);
            bad = -1;
        }
        long long hl = -1;
        if (s->kind == SEQ_V2B && j) {
            json_object_set_new(json_object_get(j, "parameters"), "binary_data_output",
                                json_true());
            free(body);
            body = golden_v2_body(j, GOLDEN_V2_BINARY, &len, &hl);
        }
        json_decref(j);
        if (s->kind == SEQ_HOLD && nheld < (int)COUNT(held)) {
            snprintf(held[nheld].label, sizeof held[nheld].label, "%s", label);
            for (int k = 0; k < 2; k++) {
                held[nheld].fd[k] = hold_one(diff_servers[k].port, body, len);
                if (held[nheld].fd[k] < 0) {
                    fprintf(stderr, "differential: %s: no answer began\n", label);
                    bad = -1;
                }
            }
            nheld++;
        } else if (s->kind != SEQ_HOLD) {
            if (s->kind == SEQ_ATT)
                snprintf(path, sizeof path, "/attention");
            else
                snprintf(path, sizeof path, "/v2/models/%s/infer",
                         s->model ? s->model : "attention");
            count(diff_compare(label, path, body, len, hl, s->hdr[0] ? s->hdr : NULL));
        }
        free(body);
    }
    return bad;
}

int diff_sequences(char *const bins[2])
{
    const struct diff_counts before = diff_counts;
    int bad = run("script", script, COUNT(script));
    diff_stop();
    const char *const flags[] = {"--port", "0", "--bind", "127.0.0.1", "--max-sequences", "2",
                                 "--max-sequence-bytes", "1536K", "--min-send-rate", "0",
                                 NULL};
    if (diff_start(bins, flags))
        return 2;
    bad |= run("limits", limits, COUNT(limits));
    diff_stop();
    const int compared = diff_counts.compared - before.compared,
              differ = diff_counts.differ - before.differ;
    printf("differential: %d sequence steps compared (%zu script steps, %zu with small limits), "
           "%d answered 200, %d 400, %d 413, %d 503, %d other; %d differ\n",
           compared, COUNT(script), COUNT(limits) - 1, diff_counts.ok200 - before.ok200,
           tally[0], tally[1], tally[2], tally[3], differ);
    return differ || bad ? 1 : 0;
}
