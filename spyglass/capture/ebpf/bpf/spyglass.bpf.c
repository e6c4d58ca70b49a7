// SPDX-License-Identifier: GPL-2.0
// spyglass capture program: follows one process tree from the kernel and
// emits one record per reported system call and per fork, exec and exit.
//
// Hooks (all of them attach on kernels without kprobes or fentry):
//   tp_btf/sys_exit                         the record, built when the call returns: its
//                                           arguments are still in the saved user registers
//   tp_btf/sched_process_fork|exec|exit     the process tree, on a ring of its own
//   tp_btf/io_uring_submit_req              io_uring opcodes
//
// A record is built in a per-CPU scratch buffer: a fixed header, then up to
// four variable-length blobs (their lengths are in the header), and copied to
// a ring with bpf_ringbuf_output.  Paths are read from the syscall's own
// arguments at exit (the pages are faulted in by then); the directory a
// relative path is relative to (a dirfd, or the working directory) is walked
// up the dentry tree with bpf_loop and written leaf first, one NUL-terminated
// name per component: user space reverses it.  Records that do not fit in
// their ring are counted per CPU and per category in `lost`.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define REC_SYS 1
#define REC_FORK 2
#define REC_EXEC 3
#define REC_EXIT 4
#define REC_URING 5

// lost[] categories (user space names them)
#define CAT_FILE 0
#define CAT_NET 1
#define CAT_PRIV 2
#define CAT_SENSITIVE 3
#define CAT_FORK 4
#define CAT_EXEC 5
#define CAT_EXIT 6
#define NCAT 8

// special handling of a syscall (struct desc.special)
#define SP_NONE 0
#define SP_OPENAT2 1
#define SP_MSG 2      // sendmsg/recvmsg: arg1 is a struct msghdr
#define SP_MMSG 3     // sendmmsg: arg1 is a struct mmsghdr array
#define SP_RECV 4     // recvfrom: payload (arg1, ret bytes), source address (arg4)
#define SP_IOCTL 5    // only TIOCSTI
#define SP_FAILONLY 6 // execve/execveat: success is the exec record
#define SP_OPEN 7     // open-like: flags in desc.flags_arg (read-only directory opens may be dropped)
#define SP_CRED 8     // credentials after the call
#define SP_TIMEX 9    // adjtimex/clock_adjtime: the modes word of the struct timex at arg flags_arg
#define SP_MOUNT 10   // mount: blob 3 is its data string (an overlay's layers)

#define TIOCSTI 0x5412
#define O_ACCMODE 3
#define O_DIRECTORY 0200000
#define O_CREAT 0100
#define O_TRUNC 01000
#define O_PATH 010000000

#define SCRATCH 32768 // the largest per-CPU value; records stay under 16 KiB
#define BLOB_MAX 4096
#define WALK_MAX 3840 // 168 + 2 * 4096 + 2 * 3840 < 16384
#define WALK_STEPS 64
#define NAME_MAX_ 256
#define PAYLOAD_MAX 512
#define SOCKADDR_MAX 128

// the offset/size masks must survive clang's optimizer for the verifier
#define BOUND(x, m) asm volatile("%[v] &= " #m : [v] "+r"(x))

struct desc {
	__u8 want;      // 1: report this syscall
	__u8 cat;       // lost[] category
	__u8 special;   // SP_*
	__s8 path_a;    // arg index of the first path (user string), -1 none
	__s8 dir_a;     // arg index of its dirfd; -2: relative to the cwd; -1 none
	__s8 path_b;    // second path
	__s8 dir_b;
	__s8 fd_a;      // arg index of an fd whose file path is reported (fchmod ...)
	__s8 sock_fd;   // arg index of a socket fd (its family, type, peer)
	__s8 addr;      // arg index of a struct sockaddr pointer
	__s8 addrlen;   // arg index of its length (value)
	__s8 flags_arg; // SP_OPEN: arg index of the open flags
};

struct rec {
	__u16 kind;
	__u16 nr;
	__u32 pid;  // thread group id
	__u32 tid;
	__u32 ppid; // fork: parent's tgid; exec: old tid
	__u64 ts;   // CLOCK_BOOTTIME ns
	__s64 ret;
	__u64 args[6];
	__u32 uid, euid, gid, egid;
	__u16 len[4];
	__u16 sk_family, sk_type, sk_proto, sk_dport;
	__u8 sk_daddr[16];
	__u16 sk_lport; // host order
	__u16 pad16;
	__u32 pad32;
	__u8 sk_laddr[16];
	__u64 f_ino; // a successful open: the new descriptor's inode and its device (kernel dev_t)
	__u32 f_dev;
	__u32 pad32b;
};

struct cfg {
	__u32 drop_dir_reads; // read-only O_DIRECTORY opens are not reported
	__u32 root_tgid;      // the command (set at its fork, cleared at its exit)
	__u32 enroll_tid;     // user space: the next process this thread forks is the command
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} life SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} tracked SEC(".maps");

// The alert ring: opens that reached a file of `urgent` (secrets, spyglass's own files, by
// device and inode; user space fills it at start).  Small, and it wakes the reader at once:
// user space reads it before the other rings, so such a record never waits behind a burst.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} alert SEC(".maps");

struct file_id {
	__u64 ino;
	__u32 dev; // the kernel's dev_t (major << 20 | minor)
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct file_id);
	__type(value, __u8);
} urgent SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, struct desc);
} descs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfg);
} settings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NCAT);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

struct scratch {
	__u8 buf[SCRATCH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

static __always_inline int is_tracked(__u32 tgid)
{
	return bpf_map_lookup_elem(&tracked, &tgid) != NULL;
}

static __always_inline struct cfg *get_cfg(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&settings, &zero);
}

static __always_inline struct scratch *get_scratch(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&scratch, &zero);
}

static __always_inline void count_lost(__u32 cat)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &cat);
	if (n)
		*n += 1;
}

// --- the dentry walk ---------------------------------------------------------

struct walk {
	__u64 dentry, mnt, root_dentry, root_mnt;
	__u32 off;   // next write offset in the scratch buffer
	__u32 start; // where this blob began
};

static long walk_step(__u64 i, void *arg)
{
	struct walk *w = arg;
	struct scratch *s = get_scratch();
	if (!s)
		return 1;
	struct dentry *d = (struct dentry *)w->dentry;
	struct vfsmount *vm = (struct vfsmount *)w->mnt;
	if (!d || (w->dentry == w->root_dentry && w->mnt == w->root_mnt))
		return 1;
	struct dentry *mnt_root = BPF_CORE_READ(vm, mnt_root);
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	if (d == mnt_root || d == parent) {
		struct mount *m = container_of(vm, struct mount, mnt);
		struct mount *mp = BPF_CORE_READ(m, mnt_parent);
		if (d != mnt_root || mp == m || !mp)
			return 1; // the top of the namespace (or of a detached tree)
		w->dentry = (__u64)BPF_CORE_READ(m, mnt_mountpoint);
		w->mnt = (__u64)&mp->mnt;
		return 0;
	}
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	__u32 off = w->off;
	if (off - w->start > WALK_MAX - NAME_MAX_ - 1)
		return 1;
	BOUND(off, 0x3fff);
	long n = bpf_probe_read_kernel_str(&s->buf[off], NAME_MAX_, name);
	if (n <= 0)
		return 1;
	w->off += n;
	w->dentry = (__u64)parent;
	return 0;
}

// Walks a dentry up to the task's root; writes the components leaf first at `off`.
// Returns the number of bytes written.  A global function: verified once, not per call.
__noinline int walk_dir(__u64 dentry, __u64 mnt, __u64 root_dentry, __u64 root_mnt, __u32 off)
{
	struct walk w = {};
	w.dentry = dentry;
	w.mnt = mnt;
	w.root_dentry = root_dentry;
	w.root_mnt = root_mnt;
	w.off = off;
	w.start = off;
	bpf_loop(WALK_STEPS, walk_step, &w, 0);
	return (w.off - off) & 0x1fff;
}

static __always_inline __u32 walk_path(struct path *p, struct task_struct *task, __u32 off)
{
	return walk_dir((__u64)BPF_CORE_READ(p, dentry), (__u64)BPF_CORE_READ(p, mnt),
			(__u64)BPF_CORE_READ(task, fs, root.dentry), (__u64)BPF_CORE_READ(task, fs, root.mnt), off);
}

static __always_inline struct file *fd_file(struct task_struct *task, __s64 fd)
{
	if (fd < 0 || fd > 1 << 20)
		return NULL;
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt)
		return NULL;
	unsigned int max = BPF_CORE_READ(fdt, max_fds);
	if ((__u64)fd >= max)
		return NULL;
	struct file **arr = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	bpf_probe_read_kernel(&f, sizeof(f), &arr[fd]);
	return f;
}

// the directory a path argument is relative to: the dirfd's file, or the cwd
static __always_inline __u32 walk_base(struct task_struct *task, __s64 dirfd, int use_cwd, __u32 off)
{
	if (use_cwd || (int)dirfd == -100 /* AT_FDCWD */) {
		struct path pwd = BPF_CORE_READ(task, fs, pwd);
		return walk_path(&pwd, task, off);
	}
	struct file *f = fd_file(task, (int)dirfd);
	if (!f)
		return 0;
	struct path fp = BPF_CORE_READ(f, f_path);
	return walk_path(&fp, task, off);
}

// --- paths through a descriptor: /dev/fd/N/NAME ------------------------------------

static __always_inline char ch(struct scratch *s, __u32 at)
{
	BOUND(at, 0x3fff);
	return s->buf[at];
}

static __always_inline int starts(struct scratch *s, __u32 at, const char *lit, const int len)
{
#pragma unroll
	for (int j = 0; j < len; j++)
		if (ch(s, at + j) != lit[j])
			return 0;
	return 1;
}

// The decimal number at `at` as the kernel's /proc reads one (no leading zero, at most 7
// digits), its end in *next; -1 when there is none.
static __always_inline int num_at(struct scratch *s, __u32 at, __u32 *next)
{
	int n = 0;
	if (ch(s, at) == '0' && ch(s, at + 1) >= '0' && ch(s, at + 1) <= '9')
		return -1;
#pragma unroll
	for (int j = 0; j < 8; j++) {
		char c = ch(s, at + j);
		if (c < '0' || c > '9') {
			*next = at + j;
			return j ? n : -1;
		}
		n = n * 10 + (c - '0');
	}
	return -1;
}

// `at` past the separators there: slashes and "." components ("//", "/./": one '/' to the kernel).
// (Bounded: more than 16 of them in a row and the name is not recognised, which the guard takes
// pessimistically when its writer is gone: spyglass.witness.protected.through_gone.)
static __always_inline __u32 sep(struct scratch *s, __u32 at)
{
#pragma unroll
	for (int j = 0; j < 16; j++) {
		char c = ch(s, at);
		if (c == '/')
			at += 1;
		else if (c == '.' && ch(s, at + 1) == '/')
			at += 2;
		else
			break;
	}
	return at;
}

// The component `lit` at `at`, then a '/': the position after that '/', else 0.
static __always_inline __u32 comp(struct scratch *s, __u32 at, const char *lit, const int len)
{
	return starts(s, at, lit, len) && ch(s, at + len) == '/' ? at + len + 1 : 0;
}

// The path at `at` names a descriptor of the caller: "/dev/fd/N", "/proc/self/fd/N",
// "/proc/thread-self/fd/N" or "/proc/<its pid or tid>/fd/N", the last two also with
// "/task/<its pid or tid>" before "/fd", each '/' possibly repeated or with "." components,
// then '/' or its end: N, else -1.  (Resolved when the call is made: the caller may be gone,
// or N elsewhere, when it is judged.)  The decoder's _THROUGH_FD is the same pattern.
__noinline int fd_in_path(__u32 at, __u32 pid, __u32 tid)
{
	struct scratch *s = get_scratch();
	if (!s)
		return -1;
	__u32 i = sep(s, at), j, end = 0;
	if ((j = comp(s, i, "dev", 3))) {
		i = comp(s, sep(s, j), "fd", 2);
	} else if ((j = comp(s, i, "proc", 4))) {
		i = sep(s, j);
		if ((j = comp(s, i, "self", 4))) {
			i = j;
		} else if ((j = comp(s, i, "thread-self", 11))) {
			i = j;
		} else {
			int who = num_at(s, i, &end);
			if (who < 0 || ((__u32)who != pid && (__u32)who != tid) || ch(s, end) != '/')
				return -1;
			i = end + 1;
		}
		i = sep(s, i);
		if ((j = comp(s, i, "task", 4))) {
			int who = num_at(s, sep(s, j), &end);
			if (who < 0 || ((__u32)who != pid && (__u32)who != tid) || ch(s, end) != '/')
				return -1;
			i = sep(s, end + 1);
		}
		i = comp(s, i, "fd", 2);
	} else {
		return -1;
	}
	if (!i)
		return -1;
	int fd = num_at(s, sep(s, i), &end);
	char c = ch(s, end);
	return fd >= 0 && (c == '/' || c == 0) ? fd : -1;
}

// Descriptor fd's file walked at `off` (0 bytes when there is no such descriptor).
static __always_inline __u32 walk_fd(struct task_struct *task, int fd, __u32 off)
{
	if (fd < 0)
		return 0;
	struct file *f = fd_file(task, fd);
	if (!f)
		return 0;
	struct path fp = BPF_CORE_READ(f, f_path);
	return walk_path(&fp, task, off);
}

static __always_inline void sock_info(struct task_struct *task, __s64 fd, struct rec *r)
{
	struct file *f = fd_file(task, (int)fd);
	if (!f)
		return;
	struct socket *sock = BPF_CORE_READ(f, private_data);
	// private_data is a socket only for socket files: check the file operations' owner type
	umode_t mode = BPF_CORE_READ(f, f_inode, i_mode);
	if ((mode & 0170000) != 0140000 || !sock)
		return;
	struct sock *sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return;
	r->sk_family = BPF_CORE_READ(sk, __sk_common.skc_family);
	r->sk_type = BPF_CORE_READ(sk, sk_type);
	r->sk_proto = BPF_CORE_READ(sk, sk_protocol);
	r->sk_dport = BPF_CORE_READ(sk, __sk_common.skc_dport);
	r->sk_lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	if (r->sk_family == 2) {
		__u32 a = BPF_CORE_READ(sk, __sk_common.skc_daddr);
		__builtin_memcpy(r->sk_daddr, &a, 4);
		a = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		__builtin_memcpy(r->sk_laddr, &a, 4);
	} else if (r->sk_family == 10) {
		BPF_CORE_READ_INTO(&r->sk_daddr, sk, __sk_common.skc_v6_daddr);
		BPF_CORE_READ_INTO(&r->sk_laddr, sk, __sk_common.skc_v6_rcv_saddr);
	}
}

static __always_inline void read_creds(struct task_struct *task, struct rec *r)
{
	const struct cred *c = BPF_CORE_READ(task, cred);
	r->uid = BPF_CORE_READ(c, uid.val);
	r->euid = BPF_CORE_READ(c, euid.val);
	r->gid = BPF_CORE_READ(c, gid.val);
	r->egid = BPF_CORE_READ(c, egid.val);
}

// The reader polls every 20 ms (and wakes at the command's exit through its pidfd); the
// program wakes it early only when more than 256 KiB are pending.
static __always_inline void emit(void *ring, struct scratch *s, __u32 size, __u32 cat)
{
	__u64 flags = BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) > (256 << 10))
		flags = BPF_RB_FORCE_WAKEUP;
	BOUND(size, 0x3fff);
	if (size < sizeof(struct rec))
		return;
	if (bpf_ringbuf_output(ring, s->buf, size, flags))
		count_lost(cat);
}

static __always_inline __u32 put_user_str(struct scratch *s, __u32 off, __u64 ptr)
{
	if (!ptr)
		return 0;
	BOUND(off, 0x3fff);
	long n = bpf_probe_read_user_str(&s->buf[off], BLOB_MAX, (void *)ptr);
	return n > 0 ? n : 0;
}

static __always_inline __u32 put_user_bytes(struct scratch *s, __u32 off, __u64 ptr, __u64 len)
{
	if (!ptr || !len)
		return 0;
	__u32 n = len > BLOB_MAX - 1 ? BLOB_MAX - 1 : len;
	BOUND(off, 0x3fff);
	BOUND(n, 0xfff);
	if (n == 0 || bpf_probe_read_user(&s->buf[off], n, (void *)ptr))
		return 0;
	return n;
}

// Blob i of the record is the n bytes just written at off: records its length, returns the
// offset after it.
static __always_inline __u32 blob_done(struct scratch *s, int i, __u32 off, __u32 n)
{
	BOUND(n, 0x1fff);
	((struct rec *)s->buf)->len[i & 3] = n;
	return off + n;
}

// Blob i: the path `p` walked up the dentry tree (leaf first).
static __always_inline __u32 put_walk(struct scratch *s, int i, __u32 off, struct path *p,
				      struct task_struct *task)
{
	BOUND(off, 0x3fff);
	return blob_done(s, i, off, walk_path(p, task, off));
}

// --- system calls --------------------------------------------------------------

static __always_inline __s64 arg(__u64 *args, __s8 i)
{
	if (i < 0 || i > 5)
		return 0;
	return args[i & 7];
}

// Blobs 0 and 1: the path arguments; 2 and 3: the directories they are relative to
// (dirfd or cwd, only for relative paths), the file of the caller's descriptor an absolute
// one goes through (/dev/fd/N/NAME: fd_in_path), or in 2 the path of an fd argument.  Global
// functions are verified once each, which keeps the program's verification short.
__noinline int sys_paths(__u32 nr)
{
	struct scratch *s = get_scratch();
	struct desc *d = bpf_map_lookup_elem(&descs, &nr);
	if (!s || !d)
		return 0;
	struct rec *r = (struct rec *)s->buf;
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 off = sizeof(struct rec);
	__u32 n;
	if (d->path_a >= 0)
		off = blob_done(s, 0, off, put_user_str(s, off, arg(r->args, d->path_a)));
	if (d->path_b >= 0)
		off = blob_done(s, 1, off, put_user_str(s, off, arg(r->args, d->path_b)));
	if (d->fd_a >= 0) {
		struct file *f = fd_file(task, arg(r->args, d->fd_a));
		if (f) {
			struct path fp = BPF_CORE_READ(f, f_path);
			off = put_walk(s, 2, off, &fp, task);
		}
	} else if (d->path_a >= 0 && d->dir_a != -1 && r->len[0] > 0) {
		BOUND(off, 0x3fff);
		// an empty path (len 1: its NUL) walks the descriptor itself: AT_EMPTY_PATH names its file;
		// an absolute one through a descriptor (/dev/fd/N/NAME) walks that descriptor's file
		if (s->buf[sizeof(struct rec)] != '/')
			n = walk_base(task, arg(r->args, d->dir_a), d->dir_a == -2, off);
		else
			n = walk_fd(task, fd_in_path(sizeof(struct rec), r->pid, r->tid), off);
		off = blob_done(s, 2, off, n);
	}
	if (d->path_b >= 0 && d->dir_b != -1 && r->len[1] > 1) {
		__u32 at = sizeof(struct rec) + r->len[0];
		BOUND(at, 0x3fff);
		BOUND(off, 0x3fff);
		// -3: the cwd even for an absolute path (fsconfig's "/a:b" holds relative names too)
		if (s->buf[at] != '/' || d->dir_b == -3)
			n = walk_base(task, arg(r->args, d->dir_b), d->dir_b <= -2, off);
		else
			n = walk_fd(task, fd_in_path(at, r->pid, r->tid), off);
		off = blob_done(s, 3, off, n);
	}
	return off;
}

// Socket facts into the header; blob 0: a received payload (DNS answers, UDP only);
// blob 1: the address argument.  Returns 0 to drop the record.
__noinline int sys_net(__u32 nr, __s64 ret)
{
	struct scratch *s = get_scratch();
	struct desc *d = bpf_map_lookup_elem(&descs, &nr);
	if (!s || !d)
		return 0;
	struct rec *r = (struct rec *)s->buf;
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 off = sizeof(struct rec);
	__u32 n;
	sock_info(task, arg(r->args, d->sock_fd), r);
	if (d->special == SP_RECV) {
		if (ret <= 0 || r->sk_proto != 17 /* UDP */)
			return 0;
		off = blob_done(s, 0, off, put_user_bytes(s, off, r->args[1], ret < PAYLOAD_MAX ? ret : PAYLOAD_MAX));
		if (r->args[4] && r->args[5]) {
			__u32 alen = 0;
			bpf_probe_read_user(&alen, sizeof(alen), (void *)r->args[5]);
			off = blob_done(s, 1, off, put_user_bytes(s, off, r->args[4], alen > SOCKADDR_MAX ? SOCKADDR_MAX : alen));
		}
		return off;
	}
	if (d->special == SP_MSG || d->special == SP_MMSG) {
		struct user_msghdr m = {};
		int recv = nr == 47; // recvmsg
		if (recv && (ret <= 0 || r->sk_proto != 17))
			return 0;
		if (bpf_probe_read_user(&m, sizeof(m), (void *)r->args[1]))
			return off;
		if (recv && m.msg_iov) {
			struct iovec iov = {};
			if (!bpf_probe_read_user(&iov, sizeof(iov), m.msg_iov)) {
				__u64 want = ret < PAYLOAD_MAX ? ret : PAYLOAD_MAX;
				if (want > iov.iov_len)
					want = iov.iov_len;
				off = blob_done(s, 0, off, put_user_bytes(s, off, (__u64)iov.iov_base, want));
			}
		}
		__u64 len = m.msg_namelen > SOCKADDR_MAX ? SOCKADDR_MAX : m.msg_namelen;
		off = blob_done(s, 1, off, put_user_bytes(s, off, (__u64)m.msg_name, len));
		return off;
	}
	if (d->addr >= 0 && arg(r->args, d->addr)) {
		__u64 len = d->addrlen >= 0 ? arg(r->args, d->addrlen) : SOCKADDR_MAX;
		off = blob_done(s, 1, off, put_user_bytes(s, off, arg(r->args, d->addr), len > SOCKADDR_MAX ? SOCKADDR_MAX : len));
	}
	return off;
}

// Argument i of the call, from the saved user registers (x86_64 syscall order).
static __always_inline __u64 reg_arg(struct pt_regs *regs, __s8 i)
{
	switch (i) {
	case 0:
		return regs->di;
	case 1:
		return regs->si;
	case 2:
		return regs->dx;
	case 3:
		return regs->r10;
	case 4:
		return regs->r8;
	case 5:
		return regs->r9;
	}
	return 0;
}

// Cheap per-call filters, before the tracked-process lookup: true when the call is not reported.
static __always_inline int skip_call(struct desc *d, struct pt_regs *regs, long ret)
{
	if (d->special == SP_FAILONLY)
		return ret >= 0; // a successful exec is the exec record
	if (d->special == SP_IOCTL)
		return regs->si != TIOCSTI;
	if (d->special == SP_OPEN) {
		__u64 fl = reg_arg(regs, d->flags_arg);
		struct cfg *c = get_cfg();
		// read-only directory opens (find, git status, ls ...): no rule or analysis uses them
		return c && c->drop_dir_reads && (fl & O_DIRECTORY) && (fl & O_ACCMODE) == 0 &&
		       !(fl & (O_CREAT | O_TRUNC));
	}
	return 0;
}

// One hook per call, at its return: the arguments are read from the saved user registers,
// which a system call leaves as it found them (only a successful exec replaces them, and its
// record comes from sched_process_exec).  Untraced calls of any process cost one array lookup.
SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	// the syscall number first (an array lookup, inlined): most calls of the machine stop here
	__u32 nr = regs->orig_ax;
	struct desc *d = bpf_map_lookup_elem(&descs, &nr);
	if (!d || !d->want || skip_call(d, regs, ret))
		return 0;
	__u64 pt = bpf_get_current_pid_tgid();
	if (!is_tracked(pt >> 32))
		return 0;
	struct scratch *s = get_scratch();
	if (!s)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct rec *r = (struct rec *)s->buf;
	__builtin_memset(r, 0, sizeof(*r));
	r->kind = REC_SYS;
	r->nr = nr;
	r->pid = pt >> 32;
	r->tid = pt;
	r->ts = bpf_ktime_get_boot_ns();
	r->ret = ret;
	// the tracepoint's pt_regs is a typed (BTF) pointer: plain loads, no probe reads
	r->args[0] = regs->di;
	r->args[1] = regs->si;
	r->args[2] = regs->dx;
	r->args[3] = regs->r10;
	r->args[4] = regs->r8;
	r->args[5] = regs->r9;
	if (d->special == SP_CRED)
		read_creds(task, r);
	if (d->special == SP_TIMEX) {
		// 0 or ADJ_OFFSET_SS_READ only read the clock's state (the kernel copies the struct
		// back as it got it, modes included); args[5] is no argument of either call
		__u32 modes = 0;
		bpf_probe_read_user(&modes, sizeof(modes), (void *)reg_arg(regs, d->flags_arg));
		r->args[5] = modes;
	}
	if (d->special == SP_OPENAT2) {
		struct open_how how = {};
		if (!bpf_probe_read_user(&how, sizeof(how), (void *)r->args[2])) {
			r->args[2] = how.flags;
			r->args[3] = how.mode;
		}
	}
	__u32 off = d->sock_fd >= 0 ? sys_net(nr, ret) : sys_paths(nr);
	if (!off)
		return 0;
	if (d->special == SP_MOUNT && ret == 0 && r->args[4]) {
		BOUND(off, 0x3fff);
		off = blob_done(s, 3, off, put_user_str(s, off, r->args[4]));
	}
	// the file a successful open reached (whatever name, link or /proc/self/fd path led there):
	// the decoder knows the protected files by device and inode
	if (ret >= 0 && (d->special == SP_OPEN || d->special == SP_OPENAT2 || nr == 85 || nr == 304)) {
		struct file *f = fd_file(task, ret);
		if (f) {
			struct inode *ino = BPF_CORE_READ(f, f_path.dentry, d_inode);
			r->f_ino = BPF_CORE_READ(ino, i_ino);
			r->f_dev = BPF_CORE_READ(ino, i_sb, s_dev);
		}
	}
	if (r->f_ino) {
		struct file_id id = {.ino = r->f_ino, .dev = r->f_dev};
		BOUND(off, 0x3fff);
		// an O_PATH open reads nothing and is no alert: it stays off the alert ring (a silent
		// flood of them would fill it, and a real read behind would wait in the events ring)
		// (the flags: open's second argument; openat's, openat2's (read above) and
		// open_by_handle_at's third; creat has none)
		__u64 fl = nr == 2 ? r->args[1] : nr == 85 ? 0 : r->args[2];
		// a full alert ring: the record goes to the events ring as any other
		if (off >= sizeof(struct rec) && !(fl & O_PATH) && bpf_map_lookup_elem(&urgent, &id) &&
		    !bpf_ringbuf_output(&alert, s->buf, off, BPF_RB_FORCE_WAKEUP))
			return 0;
	}
	emit(&events, s, off, d->cat);
	return 0;
}

// --- the process tree --------------------------------------------------------------

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 cpid = BPF_CORE_READ(child, pid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	int root = 0;
	if (!is_tracked(ptgid)) {
		// the command itself: forked by the thread user space named (no code runs in the
		// child before exec, so the parent can use vfork); user space reports its start
		struct cfg *c = get_cfg();
		if (!c || !c->enroll_tid || cpid != ctgid || c->enroll_tid != BPF_CORE_READ(parent, pid))
			return 0;
		c->enroll_tid = 0;
		c->root_tgid = ctgid;
		root = 1;
	}
	if (cpid != ctgid)
		return 0; // a thread: its process is already followed
	__u8 one = 1;
	if (bpf_map_update_elem(&tracked, &ctgid, &one, BPF_ANY))
		count_lost(CAT_FORK); // the table is full: this process is not followed (and it says so)
	if (root)
		return 0;
	struct scratch *s = get_scratch();
	if (!s)
		return 0;
	struct rec *r = (struct rec *)s->buf;
	__builtin_memset(r, 0, sizeof(*r));
	r->kind = REC_FORK;
	r->pid = ctgid;
	r->tid = cpid;
	r->ppid = ptgid;
	r->ts = bpf_ktime_get_boot_ns();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	r->nr = BPF_CORE_READ(regs, orig_ax);
	read_creds(child, r);
	struct path pwd = BPF_CORE_READ(child, fs, pwd);
	__u32 off = put_walk(s, 3, sizeof(struct rec), &pwd, child);
	emit(&life, s, off, CAT_FORK);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!is_tracked(tgid)) {
		struct cfg *c = get_cfg();
		if (c && c->root_tgid && c->root_tgid == tgid)
			bpf_send_signal(9); // the command could not be followed: it never runs unrecorded
		return 0;
	}
	struct scratch *s = get_scratch();
	if (!s)
		return 0;
	struct rec *r = (struct rec *)s->buf;
	__builtin_memset(r, 0, sizeof(*r));
	r->kind = REC_EXEC;
	r->pid = tgid;
	r->tid = BPF_CORE_READ(p, pid);
	r->ppid = old_pid;
	r->ts = bpf_ktime_get_boot_ns();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);
	r->nr = BPF_CORE_READ(regs, orig_ax);
	read_creds(p, r);
	__u32 off = sizeof(struct rec);
	const char *fname = BPF_CORE_READ(bprm, filename);
	r->args[0] = BPF_CORE_READ(bprm, interp) != fname; // a #! script: file is its interpreter
	BOUND(off, 0x3fff);
	long n = bpf_probe_read_kernel_str(&s->buf[off], BLOB_MAX, fname);
	off = blob_done(s, 0, off, n > 0 ? n : 0);
	__u64 start = BPF_CORE_READ(p, mm, arg_start);
	__u64 end = BPF_CORE_READ(p, mm, arg_end);
	off = blob_done(s, 1, off, put_user_bytes(s, off, start, end > start ? end - start : 0));
	struct path fp = BPF_CORE_READ(bprm, file, f_path);
	off = put_walk(s, 2, off, &fp, p);
	struct path pwd = BPF_CORE_READ(p, fs, pwd);
	off = put_walk(s, 3, off, &pwd, p);
	emit(&life, s, off, CAT_EXEC);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p, bool group_dead)
{
	if (!group_dead)
		return 0;
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct cfg *c = get_cfg();
	if (c && c->root_tgid && c->root_tgid == tgid)
		c->root_tgid = 0; // its pid may be reused by a process on_exec must not kill
	if (!is_tracked(tgid))
		return 0;
	bpf_map_delete_elem(&tracked, &tgid);
	struct scratch *s = get_scratch();
	if (!s)
		return 0;
	struct rec *r = (struct rec *)s->buf;
	__builtin_memset(r, 0, sizeof(*r));
	r->kind = REC_EXIT;
	r->pid = tgid;
	r->tid = BPF_CORE_READ(p, pid);
	r->ts = bpf_ktime_get_boot_ns();
	int code = BPF_CORE_READ(p, exit_code);
	if (!code)
		code = BPF_CORE_READ(p, signal, group_exit_code);
	r->ret = code;
	emit(&life, s, sizeof(struct rec), CAT_EXIT);
	return 0;
}

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(on_uring, struct io_kiocb *req)
{
	__u64 pt = bpf_get_current_pid_tgid();
	if (!is_tracked(pt >> 32))
		return 0;
	struct scratch *s = get_scratch();
	if (!s)
		return 0;
	struct rec *r = (struct rec *)s->buf;
	__builtin_memset(r, 0, sizeof(*r));
	r->kind = REC_URING;
	r->pid = pt >> 32;
	r->tid = pt;
	r->ts = bpf_ktime_get_boot_ns();
	r->args[0] = BPF_CORE_READ(req, opcode);
	emit(&events, s, sizeof(struct rec), CAT_SENSITIVE);
	return 0;
}
