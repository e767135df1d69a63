fn main() {
    for p in std::env::args().skip(1) {
        let snap = memlint_snapshot::read_snapshot_with_free_stacks(std::path::Path::new(&p)).unwrap();
        println!("{p}: {:?}", memlint_snapshot::find_loop(&snap));
    }
}
