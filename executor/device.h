/* Devices: where a plan's steps run when not on the CPU (DESIGN.md, "Execution").
 *
 *     struct ox_device *d;
 *     ox_device_open("cuda:0", OX_PRECISION_FP32, &d);   // OX_E_DEVICE: none, or not built
 *     ox_devplan_build(d, NULL, plan, &dp); // weights uploaded, device arena, kernels prepared
 *     ox_devplan_run(dp, inputs);       // plan->vals of the graph outputs hold the results
 *     ox_devplan_free(dp);
 *     ox_device_close(d);
 *
 * A device is a table of functions (allocate, free, copy in and out, synchronize, prepare
 * and run a node, capture and replay a run); each device kind fills one in its own folder
 * (kernels/cuda/device.cu) and executor/device.c, the one file that knows the kinds, opens
 * them by name. The CUDA device lives in a module of its own, libonnxexec_cuda.so, loaded
 * when a session first asks for a GPU (kernels/cuda/host.h says why and how). The device plan
 * (executor/devplan.c) mirrors a CPU plan: the same schedule, the same arena offsets in device
 * memory, constants uploaded once; a node that the device has no kernel for runs on the CPU on the
 * plan's host memory, with its inputs copied out and its outputs copied back in around it.
 *
 * Ownership: whoever opens a device closes it; a device plan borrows its device and plan.
 */
#ifndef OX_EXECUTOR_DEVICE_H
#define OX_EXECUTOR_DEVICE_H

#include "executor/plan.h"

#include <pthread.h>

struct ox_device;

struct ox_device_ops {
    void (*close)(struct ox_device *d);
    ox_status (*alloc)(struct ox_device *d, size_t n, void **out);      /* device memory */
    void (*free)(struct ox_device *d, void *p);                         /* NULL: no-op */
    ox_status (*alloc_host)(struct ox_device *d, size_t n, void **out); /* page-locked */
    void (*free_host)(struct ox_device *d, void *p);
    /* Copies queued on the device's stream (host memory page-locked for them to overlap). */
    ox_status (*copy_in)(struct ox_device *d, void *dst, const void *src, size_t n);
    ox_status (*copy_out)(struct ox_device *d, void *dst, const void *src, size_t n);
    ox_status (*sync)(struct ox_device *d);
    /* Queue dst[i] = src[i] for n elements between OX_FLOAT and OX_FLOAT16 (device memory). */
    ox_status (*convert)(struct ox_device *d, void *dst, ox_dtype dst_type, const void *src,
                         ox_dtype src_type, int64_t n);
    /* Whether the device runs node n with these tensors (device pointers; bit k of
     * const_inputs: input k never changes): OX_OK with *kernel (the step's handle) and the
     * scratch bytes it needs at run time, OX_E_UNSUPPORTED when it has no kernel for it.
     * precise: the plan computes gradients (ox_infer_ctx.precise): no algorithm that rounds
     * more than a direct sum (FFT, Winograd). */
    ox_status (*prepare)(struct ox_device *d, const struct ox_node *n, const ox_tensor *const *in,
                         ox_tensor *const *out, unsigned const_inputs, bool precise, void **kernel,
                         size_t *scratch);
    /* Queue the node's work; scratch holds what prepare asked for. */
    ox_status (*run)(struct ox_device *d, void *kernel, const struct ox_node *n,
                     const ox_tensor *const *in, ox_tensor *const *out, void *scratch,
                     size_t scratch_bytes);
    void (*release)(struct ox_device *d, void *kernel);
    /* Record what is queued between capture_begin and capture_end as one replayable run. */
    ox_status (*capture_begin)(struct ox_device *d);
    ox_status (*capture_end)(struct ox_device *d, void **graph);
    ox_status (*replay)(struct ox_device *d, void *graph);
    void (*graph_free)(struct ox_device *d, void *graph);
    /* Profiling (NULL where a device has none: each step is then waited for and timed on the
     * host): mark(i) queues mark i, the moment the device reaches that point of its queue;
     * elapsed(i, j) gives the seconds from mark i to mark j once both are past (after sync). */
    ox_status (*mark)(struct ox_device *d, int i);
    ox_status (*elapsed)(struct ox_device *d, int i, int j, double *seconds);
    /* Wait until the device is past mark i (NULL where mark is: outputs then come back after
     * the whole run, not a chunk at a time). */
    ox_status (*wait)(struct ox_device *d, int i);
};

struct ox_device {
    const struct ox_device_ops *ops;
    char name[256];      /* "cuda:0 (NVIDIA H100 80GB HBM3)" */
    int precision;       /* OX_PRECISION_* */
    pthread_mutex_t *mu; /* one run at a time on the device's stream (shared by every
                            session on the same GPU) */
};

/* Open a device by name: "cpu" gives *out = NULL (plans run on the CPU as always), "cuda" or
 * "cuda:N" the N-th GPU. OX_E_DEVICE says why when there is none or the build has no CUDA. */
ox_status ox_device_open(const char *spec, int precision, struct ox_device **out);
/* Check a device name without opening it: *index -1 for the CPU (NULL, "" or "cpu"), N for
 * "cuda" (0) or "cuda:N"; OX_E_INVALID for anything else. Needs no GPU. */
ox_status ox_device_parse(const char *spec, int *index);
void ox_device_close(struct ox_device *d);

/* The device copies of a session's weights (initializers), shared by all its plans (one per
 * input shape), so that a model run at several batch sizes holds its weights on the device
 * once. Owned by the session, freed after its plans, before its device. */
struct ox_devconsts;
ox_status ox_devconsts_create(struct ox_device *d, struct ox_devconsts **out);
void ox_devconsts_free(struct ox_devconsts *c);

struct ox_devplan;
/* shared: where the plan's initializers go (borrowed; NULL: the plan's own copies). */
ox_status ox_devplan_build(struct ox_device *d, struct ox_devconsts *shared, struct ox_plan *p,
                           struct ox_devplan **out);
/* Run: inputs as for ox_plan_run; the graph outputs are left in p->vals (host memory). */
ox_status ox_devplan_run(struct ox_devplan *dp, const ox_tensor *const *inputs);
void ox_devplan_free(struct ox_devplan *dp);
/* The host bytes of each chunk in which inputs and outputs are staged and copied (default 4
 * MiB; a multiple of 4): tests set small ones to cross many chunk boundaries. */
void ox_devplan_set_stage_step(struct ox_devplan *dp, size_t bytes);
/* Steps on the device and on the CPU, and whether runs replay one captured graph. */
void ox_devplan_stats(const struct ox_devplan *dp, int *n_device, int *n_cpu, bool *is_captured);
/* The node of each step that fell back to the CPU (for reports): *n of them. Borrowed. */
const int *ox_devplan_cpu_nodes(const struct ox_devplan *dp, int *n);

#endif
