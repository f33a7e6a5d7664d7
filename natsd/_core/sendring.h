/* sendring.h: many sockets' sends in one system call, on an io_uring (natsd/_core/conn.pyx).
 *
 * A send wakes the reader on the other end, and Linux lets the woken reader run on the
 * sender's CPU at the sender's next return to user space. Sixteen sends in a row, one system
 * call each, are then sixteen trips through the scheduler, with each reader's work done in
 * between on the loop's CPU. Submitted together, the sends all happen inside one
 * io_uring_enter: every reader is woken there, the loop is not preempted between the
 * sends, and it goes on.
 *
 * Only what natsd needs: a ring of SENDs with MSG_DONTWAIT (a full socket answers -EAGAIN at
 * once instead of being retried by the kernel), submitted and reaped in the same call. The
 * structures are the kernel's ABI (linux/io_uring.h), declared here so that building does
 * not need the kernel's headers. Any failure to set the ring up (an old kernel, io_uring
 * disabled, a seccomp filter) leaves natsd on plain send(), as before.
 */
#ifndef NATSD_SENDRING_H
#define NATSD_SENDRING_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_io_uring_enter
#define __NR_io_uring_enter 426
#endif

struct nsr_sqring_offsets { uint32_t head, tail, ring_mask, ring_entries, flags, dropped, array, resv1; uint64_t user_addr; };
struct nsr_cqring_offsets { uint32_t head, tail, ring_mask, ring_entries, overflow, cqes, flags, resv1; uint64_t user_addr; };
struct nsr_params {
    uint32_t sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle, features, wq_fd, resv[3];
    struct nsr_sqring_offsets sq_off;
    struct nsr_cqring_offsets cq_off;
};
struct nsr_sqe {                    /* struct io_uring_sqe, 64 bytes */
    uint8_t opcode, flags;
    uint16_t ioprio;
    int32_t fd;
    uint64_t off, addr;
    uint32_t len, msg_flags;
    uint64_t user_data;
    uint64_t pad[3];
};
struct nsr_cqe { uint64_t user_data; int32_t res; uint32_t flags; };

#define NSR_OP_SEND 26              /* IORING_OP_SEND */
#define NSR_OFF_SQ_RING 0ULL
#define NSR_OFF_CQ_RING 0x8000000ULL
#define NSR_OFF_SQES 0x10000000ULL
#define NSR_ENTER_GETEVENTS 1u
#define NSR_FEAT_SINGLE_MMAP 1u

typedef struct {
    int fd;                         /* -1: no ring */
    unsigned entries;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct nsr_sqe *sqes;
    struct nsr_cqe *cqes;
    void *sq_map, *cq_map;
    size_t sq_len, cq_len, sqes_len;
} nsr_ring;

typedef struct {
    int fd;
    const char *p;
    size_t n;
    long res;                       /* bytes the kernel took, or -errno */
} nsr_send;

static void nsr_close(nsr_ring *r)
{
    if (r->sqes) munmap(r->sqes, r->sqes_len);
    if (r->cq_map && r->cq_map != r->sq_map) munmap(r->cq_map, r->cq_len);
    if (r->sq_map) munmap(r->sq_map, r->sq_len);
    if (r->fd >= 0) close(r->fd);
    memset(r, 0, sizeof(*r));
    r->fd = -1;
}

/* 0, or -errno when there is no ring to be had (r->fd stays -1). */
static int nsr_open(nsr_ring *r, unsigned entries)
{
    struct nsr_params p;
    char *sq, *cq;
    memset(r, 0, sizeof(*r));
    memset(&p, 0, sizeof(p));
    r->fd = (int)syscall(__NR_io_uring_setup, entries, &p);
    if (r->fd < 0) {
        int err = errno;
        r->fd = -1;
        return -err;
    }
    r->entries = p.sq_entries;
    r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct nsr_cqe);
    if (p.features & NSR_FEAT_SINGLE_MMAP) {
        if (r->cq_len > r->sq_len) r->sq_len = r->cq_len;
        r->cq_len = r->sq_len;
    }
    r->sq_map = mmap(0, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, NSR_OFF_SQ_RING);
    if (r->sq_map == MAP_FAILED) { r->sq_map = 0; goto fail; }
    if (p.features & NSR_FEAT_SINGLE_MMAP) {
        r->cq_map = r->sq_map;
    } else {
        r->cq_map = mmap(0, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, NSR_OFF_CQ_RING);
        if (r->cq_map == MAP_FAILED) { r->cq_map = 0; goto fail; }
    }
    r->sqes_len = p.sq_entries * sizeof(struct nsr_sqe);
    r->sqes = mmap(0, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, NSR_OFF_SQES);
    if (r->sqes == MAP_FAILED) { r->sqes = 0; goto fail; }
    sq = r->sq_map;
    cq = r->cq_map;
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct nsr_cqe *)(cq + p.cq_off.cqes);
    return 0;
fail:
    {
        int err = errno;
        nsr_close(r);
        return -err;
    }
}

/* NSR_NOT_SENT: the result of an entry the ring never submitted (it failed first). */
#define NSR_NOT_SENT (-1000000L)

/* Send every entry, r->entries at a time; s[i].res gets the bytes taken or -errno. Returns
 * 0, or -errno when the ring refused a submission: the entries from there on keep
 * NSR_NOT_SENT and the caller sends them the plain way. Once submitted, a round is always
 * reaped to the end (a send with MSG_DONTWAIT completes inside the submission), so no byte
 * is ever sent twice. */
static int nsr_send_all(nsr_ring *r, nsr_send *s, size_t n)
{
    size_t done = 0, i;
    for (i = 0; i < n; i++) s[i].res = NSR_NOT_SENT;
    while (done < n) {
        size_t k = n - done, j, got = 0;
        unsigned tail = *r->sq_tail, mask = *r->sq_mask, taken;
        long ret;
        int err;
        if (k > r->entries) k = r->entries;
        for (j = 0; j < k; j++) {
            unsigned at = (tail + (unsigned)j) & mask;
            struct nsr_sqe *e = &r->sqes[at];
            nsr_send *x = &s[done + j];
            memset(e, 0, sizeof(*e));
            e->opcode = NSR_OP_SEND;
            e->fd = x->fd;
            e->addr = (uint64_t)(uintptr_t)x->p;
            e->len = (uint32_t)(x->n > 0x7ffff000u ? 0x7ffff000u : x->n);
            e->msg_flags = MSG_NOSIGNAL | MSG_DONTWAIT;
            e->user_data = done + j;
            r->sq_array[at] = at;
        }
        __atomic_store_n(r->sq_tail, tail + (unsigned)k, __ATOMIC_RELEASE);
        ret = syscall(__NR_io_uring_enter, r->fd, (unsigned)k, (unsigned)k, NSR_ENTER_GETEVENTS, NULL, 0);
        err = ret < 0 ? errno : EIO;
        taken = __atomic_load_n(r->sq_head, __ATOMIC_ACQUIRE) - tail;
        if (taken != k) {               /* interrupted, or short of resources: once more */
            ret = syscall(__NR_io_uring_enter, r->fd, (unsigned)(k - taken), 0, 0, NULL, 0);
            if (ret < 0)
                err = errno;
            taken = __atomic_load_n(r->sq_head, __ATOMIC_ACQUIRE) - tail;
            if (taken != k)             /* take back what the kernel did not take */
                __atomic_store_n(r->sq_tail, tail + taken, __ATOMIC_RELEASE);
        }
        for (;;) {
            unsigned ctail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
            unsigned head = *r->cq_head;
            while (head != ctail) {
                struct nsr_cqe *c = &r->cqes[head & *r->cq_mask];
                if (c->user_data < n) s[c->user_data].res = c->res;
                head++;
                got++;
            }
            __atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
            if (got >= taken) break;
            syscall(__NR_io_uring_enter, r->fd, 0, (unsigned)(taken - got), NSR_ENTER_GETEVENTS, NULL, 0);
        }
        done += taken;
        if (taken != k)
            return -err;
    }
    return 0;
}

#endif
