use gpucarve::carve::fragments::{Claims, FragLimits, recover_with};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let img = gpucarve::source::Image::open(std::path::Path::new(&a[1])).unwrap();
    let start: u64 = a[2].parse().unwrap();
    let max_len: u64 = a[3].parse().unwrap();
    let r = gpucarve::carve::view::ImageBytes::new(&img);
    let mut claims = Claims::default();
    let t = std::time::Instant::now();
    let at = recover_with(
        "jpeg",
        &r,
        start,
        max_len,
        4096,
        &FragLimits::default(),
        &mut claims,
    );
    println!(
        "{:?} {:?} {:.3}s",
        at.note,
        at.joined.map(|j| j.runs),
        t.elapsed().as_secs_f64()
    );
}
