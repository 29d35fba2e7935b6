/* Types shaped like the kernel's, compiled with `gcc -g` and turned into BTF by
 * `pahole` for tests/test_trace_names.py (struct page, struct slab, struct kmem_cache,
 * a slab object type, a per-cpu variable). Only the layouts matter; nothing runs. */
#include <stdbool.h>

typedef struct { int counter; } atomic_t;
typedef struct { unsigned int lock; } spinlock_t;
struct list_head { struct list_head *next, *prev; };

enum pageflags { PG_locked, PG_head = 6, PG_slab = 9 };

struct page {
	unsigned long flags;
	union {
		struct {
			struct list_head lru;
			void *mapping;
			unsigned long index;
			unsigned long private;
		};
		struct {
			unsigned long compound_head;
		};
	};
	atomic_t _mapcount;
	atomic_t _refcount;
	unsigned long memcg_data;
};

struct kmem_cache;
struct slab {
	unsigned long __page_flags;
	struct list_head slab_list;
	struct kmem_cache *slab_cache;
	void *freelist;
	unsigned long counters;
	unsigned int __unused;
	atomic_t __page_refcount;
	unsigned long memcg_data;
};

struct kmem_cache {
	unsigned long flags;
	unsigned int size;
	unsigned int object_size;
	unsigned int offset;
	const char *name;
	int red_left_pad;
};

struct fdtable {
	unsigned int max_fds;
	void **fd;
	unsigned long *open_fds;
};

struct wide {
	unsigned long words[10];
	unsigned int inner;
};

struct files_struct {
	atomic_t count;
	bool resize_in_progress;
	union {
		unsigned int first_alternative;
		unsigned long second_alternative;
	};
	struct {
		int anon_a;
		int anon_b;
	};
	struct fdtable fdtab;
	spinlock_t file_lock;
	unsigned int next_fd;
	struct wide wide;
	unsigned int small_bits : 3, more_bits : 5;
	void *fd_array[];
};

/* Points to objects of caches without a type (kmalloc): directly and through a struct. */
struct owner {
	int count;
	struct fdtable *fdt;
	unsigned long *direct_bits;
};

struct rq {
	spinlock_t __lock;
	unsigned int nr_running;
	struct list_head list;
};

__attribute__((section(".data..percpu"))) struct rq runqueues;

struct page page_example;
struct slab slab_example;
struct kmem_cache cache_example;
struct files_struct files_example;
enum pageflags flags_example;
struct owner owner_example;
