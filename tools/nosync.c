/* tools/nosync.c: a diagnostic shim for tools/r3_compare.py --without-fdatasync.
 *
 * Loaded with LD_PRELOAD into natsd, it turns fdatasync and fsync into calls that return at
 * once, so the servers' pipeline runs without waiting for the disk. That is not a valid
 * configuration (nothing acknowledged is durable): it measures how much of a replicated
 * benchmark's time is the disk's, on a machine where every replica shares one disk.
 */
int fdatasync(int fd) { (void)fd; return 0; }
int fsync(int fd) { (void)fd; return 0; }
