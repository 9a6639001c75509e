use gpucarve::carve::validators::{Limits, Status, validate};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = &args[1];
    let mut total = 0;
    let mut exact = 0;
    let t0 = std::time::Instant::now();
    for line in std::io::stdin().lines() {
        let p = line.unwrap();
        let Ok(d) = std::fs::read(&p) else { continue };
        total += 1;
        match validate(name, &d, 0, Limits { max_len: u64::MAX }) {
            Some(v) if v.status == Status::Complete && v.length == d.len() as u64 => {
                exact += 1;
                if std::env::var("V").is_ok() {
                    println!("{p}: {:?}", v.notes)
                }
            }
            other => println!(
                "{p} ({}): {:?}",
                d.len(),
                other.map(|v| (v.status, v.length, v.subtype, v.notes))
            ),
        }
    }
    println!("{name}: {exact}/{total} exact in {:?}", t0.elapsed());
}
