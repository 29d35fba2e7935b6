/* Layouts of Linux 6.12.117+deb12-rt-amd64 (its BTF) that data naming reads, written by
 * tests/data/dump_kernel_layouts.py. Only offsets and sizes matter. */
enum pageflags {
	PG_head = 0x6,
};

enum pagetype {
	PGTY_buddy = 0xf0,
	PGTY_offline = 0xf1,
	PGTY_table = 0xf2,
	PGTY_guard = 0xf3,
	PGTY_hugetlb = 0xf4,
	PGTY_slab = 0xf5,
	PGTY_zsmalloc = 0xf6,
	PGTY_unaccepted = 0xf7,
	PGTY_mapcount_underflow = 0xff,
};

struct page {
	unsigned long flags;
	unsigned long compound_head;
	unsigned char __pad_16[8];
	unsigned long mapping;
	unsigned char __pad_32[16];
	unsigned int page_type;
	unsigned char __pad_52[12];
};

struct slab {
	unsigned char __pad_0[8];
	unsigned long slab_cache;
	unsigned char __pad_16[32];
	unsigned int __page_type;
	unsigned char __pad_52[12];
};

struct kmem_cache {
	unsigned char __pad_0[24];
	unsigned int size;
	unsigned int object_size;
	unsigned char __pad_32[56];
	unsigned int red_left_pad;
	unsigned char __pad_92[4];
	unsigned long name;
	unsigned char __pad_104[8304];
};

struct files_struct {
	unsigned int count;
	unsigned char __pad_4[52];
	unsigned long fdt;
	unsigned char __pad_64[64];
	unsigned char file_lock[32];
	unsigned int next_fd;
	unsigned char __pad_164[28];
	unsigned char fd_array[512];
};

struct mm_struct {
	unsigned char __pad_0[192];
	unsigned int map_count;
	unsigned char __pad_196[36];
	unsigned char mmap_lock[40];
	unsigned char __pad_272[1200];
};

struct page *page_p;
struct slab *slab_p;
struct kmem_cache *kmem_cache_p;
struct files_struct *files_struct_p;
struct mm_struct *mm_struct_p;
enum pageflags pageflags_v;
enum pagetype pagetype_v;
