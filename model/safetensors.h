/* safetensors.h -- the service's own reader of the safetensors format
 * (huggingface/safetensors): 8 bytes of little-endian header length N, N
 * bytes of JSON header, then the tensors' bytes.
 *
 *     struct st_file f;
 *     char err[256];
 *     if (st_open(&f, "model.safetensors", err, sizeof err) != 0)
 *         ... err names the problem and the tensor ...
 *     const struct st_tensor *t = st_find(&f, "out_proj.weight");
 *     float *w = t ? malloc(t->count * sizeof *w) : NULL;   (check the size)
 *     if (w && st_read_f32(&f, w, t, err, sizeof err) == 0) ...
 *     st_close(&f);                       (t dies here)
 *
 * st_open() reads the header and keeps the file open; st_read_f32() reads
 * one tensor's bytes (pread) when asked, so only the tensors used are read.
 * The file is never mapped: a file that shrinks while it is read (`cp new
 * model.safetensors` truncates it first) would make a mapping's pages fault
 * (SIGBUS, the whole process). Here a short read, or a file whose size or
 * modification time differ from st_open's, ends the read with an error
 * ("changed while it was read"); the tensors read before it are copies,
 * unaffected by what happens to the file later. The modification time has
 * the kernel's tick (a few ms): a rewrite of the same length within a tick
 * of st_open can pass unseen, which is why a model file is replaced by
 * writing elsewhere and renaming (docs/models.md, "Replacing a model's
 * file").
 *
 * Validation follows the reference reader (safetensors/src/tensor.rs,
 * read_metadata + Metadata::validate): fewer than 8 bytes, N > 100,000,000,
 * N past the end, a header that is not UTF-8 JSON (an object; whitespace
 * around it allowed; duplicate keys refused), a tensor entry that is not
 * exactly {dtype, shape, data_offsets}, an unknown dtype, an element count
 * or byte size that overflows, a byte size that is not count × dtype size,
 * tensors that do not tile the data section from 0 (overlap or hole, in
 * offset order), a file longer or shorter than 8 + N + data, and a
 * __metadata__ that is not an object of strings are errors. Every dtype of
 * the reference is known (for sizes); st_to_f32() converts F32, F16 and BF16.
 *
 * An st_file is read-only once opened and may be read from many threads.
 */
#ifndef MODEL_SAFETENSORS_H
#define MODEL_SAFETENSORS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_HEADER 100000000u /* the reference's MAX_HEADER_SIZE */

struct st_tensor {
    const char *name;      /* borrowed from the header */
    const char *dtype;     /* "F32", "F16", "BF16", "I8", ... (static) */
    int ndim;
    const uint64_t *shape; /* (ndim), borrowed */
    uint64_t count;        /* product of shape (1 for rank 0) */
    const void *data;      /* st_parse: nbytes bytes, little-endian, maybe
                              unaligned; st_open: NULL (st_read_f32 reads) */
    uint64_t offset;       /* of its first byte in the file */
    uint64_t nbytes;
};

struct st_file {
    const unsigned char *buf; /* st_parse: the whole file (8 + N + data bytes); else NULL */
    size_t len;               /* the file's length */
    int has_fd, fd;           /* st_open: the open file */
    long long mtime_ns;       /* st_open: its modification time (with len, what
                                 tells a rewritten file) */
    json_t *header;           /* owned */
    json_t *metadata;         /* borrowed from header, or NULL */
    struct st_tensor *tensors;/* (n), in offset order; owned */
    size_t n;
    uint64_t *dims;           /* every tensor's shape, end to end; owned */
};

/* Open path, read its header and validate it. Returns 0, or -1 with err set
 * (and nothing to close). Refuses a file that is not a regular file. */
int st_open(struct st_file *f, const char *path, char *err, size_t errlen);

/* Validate buf (len bytes, borrowed: it must outlive f) as a safetensors
 * file. Returns 0, or -1 with err set (and nothing to close). */
int st_parse(struct st_file *f, const void *buf, size_t len, char *err, size_t errlen);

/* The tensor called name, or NULL. */
const struct st_tensor *st_find(const struct st_file *f, const char *name);

/* 1 when st_to_f32() converts the dtype (F32, F16, BF16), else 0. */
int st_dtype_convertible(const char *dtype);

/* dst: (t->count) float32, the exact value of each element (F16 subnormals,
 * infinities and NaNs included), from t->data (st_parse). Returns 0, or -1
 * when the dtype is not convertible or t has no data in memory. */
int st_to_f32(float *dst, const struct st_tensor *t);

/* st_to_f32() for a tensor of f, read from the file (st_open) or memory
 * (st_parse). Returns 0, or -1 with err set (not convertible; a read error;
 * the file changed while it was read). Thread-safe (pread). */
int st_read_f32(const struct st_file *f, float *dst, const struct st_tensor *t, char *err,
                size_t errlen);

/* "(2, 3)": a shape as the error messages write it, into s (n bytes). */
void st_shape_str(char *s, size_t n, const uint64_t *shape, int ndim);

/* Close and free; accepts a zeroed or already closed f. */
void st_close(struct st_file *f);

#endif
