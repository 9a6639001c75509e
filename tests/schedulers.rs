//! The scheduler recipes of docs/batch.md, run as users run them:
//!
//! * `examples/slurm/carve-array.sh` is submitted with `sbatch --wait
//!   --array=1-4` to a one-node Slurm cluster that the test starts
//!   (`examples/slurm/local-cluster.sh`: munged, slurmctld, slurmd, all in a
//!   temporary folder); the four parts are merged and the merged reports must
//!   equal a single-process carve's.
//! * `examples/k8s/*.yaml` are parsed, their fields checked, and their
//!   container scripts run the way the pods of the Indexed Job and the merge
//!   Job would run them; the merged reports must equal a single carve's.
//!
//! Slurm comes from Debian's `slurm-wlm` and `munge`, YAML parsing from
//! `python3-yaml`. Without them these checks print why and are not run,
//! unless `GPUCARVE_REQUIRE_SLURM=1` (CI), where they fail.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn image(dir: &Path, seed: u32) -> PathBuf {
    common::raw_image(dir, "disk.img", "16MiB", seed).expect("corpora/mkimage.py")
}

/// PATH with the gpucarve under test first, as a user's installed one would be.
fn path_with_gpucarve() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_gpucarve"))
        .parent()
        .expect("binary folder")
        .to_path_buf();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn run_ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The same carving in one process, for comparison.
fn single_carve(img: &Path, out: &Path, opts: &[&str]) {
    run_ok(common::carve_cmd(img, out).args(opts));
}

/// report.jsonl entries without ids (the merged ids must still run 1, 2, 3...).
fn entries_sans_ids(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("report.jsonl")).unwrap();
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["id"].as_u64(), Some(i as u64 + 1), "{}", dir.display());
            v.as_object_mut().unwrap().remove("id");
            v
        })
        .collect()
}

/// hashes.txt rows with paths relative to the output folder.
fn hash_rows(dir: &Path) -> Vec<String> {
    let root = format!("{}/", dir.display());
    std::fs::read_to_string(dir.join("hashes.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("##"))
        .map(|l| l.replace(&root, ""))
        .collect()
}

fn assert_same_carving(merged: &Path, single: &Path) {
    let (m, s) = (entries_sans_ids(merged), entries_sans_ids(single));
    assert!(s.len() > 10, "too few files to compare: {}", s.len());
    assert_eq!(m, s, "merged report.jsonl differs from a single run's");
    assert_eq!(
        common::dfxml_sans_run(&merged.join("report.xml")),
        common::dfxml_sans_run(&single.join("report.xml"))
    );
    assert_eq!(hash_rows(merged), hash_rows(single));
}

/// Options for every carving here. Each shard estimates the cluster size
/// from the file starts in its own slice; giving it makes the fragment search
/// (and its notes) the same in every shard as in one run.
const OPTS: [&str; 4] = ["--engine", "cpu", "--cluster-size", "4096"];

/// Skips (with the reason) or, under GPUCARVE_REQUIRE_SLURM=1, fails.
fn skip_or_fail(reason: &str) {
    assert!(
        !common::required("GPUCARVE_REQUIRE_SLURM"),
        "GPUCARVE_REQUIRE_SLURM=1: {reason}"
    );
    eprintln!("note: {reason}; Slurm/Kubernetes recipe check not run");
}

/// A free TCP port on the loopback interface.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The one-node cluster; stopped (its own daemons, by pid) when dropped.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
}

impl Cluster {
    fn script() -> PathBuf {
        repo().join("examples/slurm/local-cluster.sh")
    }

    fn start(dir: &Path) -> Result<Cluster, String> {
        let o = Command::new("bash")
            .arg(Self::script())
            .arg("start")
            .arg(dir)
            .env("SLURMCTLD_PORT", free_port().to_string())
            .env("SLURMD_PORT", free_port().to_string())
            .output()
            .map_err(|e| format!("bash: {e}"))?;
        let cluster = Cluster {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
        };
        if !o.status.success() {
            return Err(format!(
                "the Slurm cluster did not start: {}",
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        let stdout = String::from_utf8_lossy(&o.stdout);
        if !stdout.contains(&format!("SLURM_CONF={}", cluster.conf.display())) {
            return Err(format!("unexpected output of local-cluster.sh: {stdout}"));
        }
        Ok(cluster)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(Self::script())
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

#[test]
fn slurm_job_array_then_merge_equals_one_run() {
    let missing: Vec<&str> = ["munged", "slurmctld", "slurmd", "sbatch", "sinfo"]
        .into_iter()
        .filter(|t| {
            !Command::new("sh")
                .args(["-c", &format!("PATH=$PATH:/usr/sbin:/sbin command -v {t}")])
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if !missing.is_empty() {
        return skip_or_fail(&format!(
            "{} not installed (apt-get install slurm-wlm munge)",
            missing.join(", ")
        ));
    }
    let d = tempfile::tempdir().unwrap();
    // Shorter than the temporary folder: slurmd's spool paths must fit in a socket address.
    let cluster = match Cluster::start(&d.path().join("cl")) {
        Ok(c) => c,
        Err(e) => return skip_or_fail(&e),
    };
    let img = image(d.path(), 21);
    let case = d.path().join("case");
    // The documented script, as a user submits it: the array size and
    // smaller resources on the command line, carve options after CASE.
    let mut sbatch = Command::new("timeout");
    sbatch
        .args([
            "100",
            "sbatch",
            "--wait",
            "--array=1-4",
            "--cpus-per-task=1",
            "--mem=200M",
        ])
        .arg(format!("--chdir={}", d.path().display()))
        .arg(repo().join("examples/slurm/carve-array.sh"))
        .arg(&img)
        .arg(&case)
        .args(OPTS)
        .env("SLURM_CONF", &cluster.conf)
        .env("PATH", path_with_gpucarve());
    let o = sbatch.output().expect("sbatch");
    let logs = || {
        let mut s = String::new();
        for f in ["log/slurmctld.log", "log/slurmd.log"] {
            s.push_str(&std::fs::read_to_string(cluster.dir.join(f)).unwrap_or_default());
        }
        for e in std::fs::read_dir(d.path()).unwrap().flatten() {
            if e.file_name().to_string_lossy().ends_with(".out") {
                s.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        s
    };
    assert!(
        o.status.success(),
        "sbatch --wait failed: {}{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        logs()
    );
    let parts: Vec<PathBuf> = (1..=4).map(|i| case.join(format!("part{i}"))).collect();
    for (i, p) in parts.iter().enumerate() {
        let audit = std::fs::read_to_string(p.join("audit.txt"))
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", p.display(), logs()));
        assert!(
            audit.contains("owned range:"),
            "part{} is not a shard",
            i + 1
        );
        // The task's progress went to CASE/partI.log as JSON lines.
        let log = std::fs::read_to_string(case.join(format!("part{}.log", i + 1))).unwrap();
        assert!(
            log.lines()
                .any(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["bytes_total"].is_u64())),
            "{log}"
        );
    }
    let merged = case.join("all");
    let mut merge = common::bin();
    merge.arg("merge").args(&parts).arg("-o").arg(&merged);
    run_ok(&mut merge);
    drop(cluster);
    let single = d.path().join("single");
    single_carve(&img, &single, &OPTS);
    assert_same_carving(&merged, &single);
}

#[test]
fn slurm_script_refuses_to_run_outside_a_job_array() {
    let d = tempfile::tempdir().unwrap();
    let o = Command::new("bash")
        .arg(repo().join("examples/slurm/carve-array.sh"))
        .args(["disk.img", "case"])
        .env_remove("SLURM_ARRAY_TASK_ID")
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("job array"));
    assert!(!d.path().join("case").exists());
}

/// The documents of a YAML file, as JSON (python3-yaml), or None with a note.
fn yaml_docs(file: &Path) -> Option<Vec<Value>> {
    let o = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys, json, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(file)
        .output();
    match o {
        Ok(o) if o.status.success() => Some(serde_json::from_slice(&o.stdout).unwrap()),
        other => {
            skip_or_fail(&format!(
                "cannot parse YAML with /usr/bin/python3 (apt-get install python3-yaml): {other:?}"
            ));
            None
        }
    }
}

/// The container's environment and its `sh -c` script.
fn container(job: &Value) -> (Vec<(String, String)>, String) {
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["command"], serde_json::json!(["sh", "-c"]), "{c}");
    let env = c["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (env, c["args"][0].as_str().expect("args[0]").to_string())
}

fn env_of<'a>(env: &'a [(String, String)], name: &str) -> &'a str {
    env.iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} in the container's env"))
}

#[test]
fn kubernetes_jobs_are_well_formed_and_their_scripts_carve_and_merge() {
    let dir = repo().join("examples/k8s");
    let (Some(carve), Some(merge)) = (
        yaml_docs(&dir.join("carve-job.yaml")),
        yaml_docs(&dir.join("merge-job.yaml")),
    ) else {
        return;
    };
    assert_eq!(carve.len(), 1);
    assert_eq!(merge.len(), 1);
    let (job, mjob) = (&carve[0], &merge[0]);
    for j in [job, mjob] {
        assert_eq!(j["apiVersion"], "batch/v1");
        assert_eq!(j["kind"], "Job");
        assert!(j["metadata"]["name"].is_string());
        let rp = &j["spec"]["template"]["spec"]["restartPolicy"];
        assert!(rp == "OnFailure" || rp == "Never", "{rp}");
        // Every volume mounted is declared, and the other way round.
        let spec = &j["spec"]["template"]["spec"];
        let mut mounts: Vec<&str> = spec["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        let mut vols: Vec<&str> = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        mounts.sort();
        vols.sort();
        assert_eq!(mounts, vols);
    }
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let n = spec["completions"].as_u64().unwrap();
    assert!(spec["parallelism"].as_u64().unwrap() <= n);
    let (env, script) = container(job);
    assert_eq!(
        env_of(&env, "SHARDS"),
        n.to_string(),
        "SHARDS must equal completions"
    );
    let (menv, mscript) = container(mjob);
    assert_eq!(env_of(&menv, "SHARDS"), n.to_string());
    assert_eq!(env_of(&menv, "CASE"), env_of(&env, "CASE"));
    assert!(script.contains("JOB_COMPLETION_INDEX") && script.contains("--shard"));
    // The evidence is mounted read-only, its claim too.
    let pod = &spec["template"]["spec"];
    let image_dir = Path::new(env_of(&env, "IMAGE")).parent().unwrap();
    let ev = pod["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| Path::new(m["mountPath"].as_str().unwrap()) == image_dir)
        .expect("a volume mounted where IMAGE is");
    assert_eq!(ev["readOnly"], true);
    let claim = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == ev["name"])
        .unwrap();
    assert_eq!(claim["persistentVolumeClaim"]["readOnly"], true);

    // Run the scripts as the pods would: index 0..3 of a 4-shard Job, then
    // the merge, with the image and case folder local.
    let d = tempfile::tempdir().unwrap();
    let img = image(d.path(), 21);
    let case = d.path().join("case");
    std::fs::create_dir(&case).unwrap();
    let shards = "4";
    for k in 0..4 {
        let mut sh = Command::new("sh");
        sh.arg("-c")
            // The carve options of this test, on the script's `exec gpucarve carve` line.
            .arg(format!("{} {}", script.trim_end(), OPTS.join(" ")))
            .env("JOB_COMPLETION_INDEX", k.to_string())
            .env("IMAGE", &img)
            .env("CASE", &case)
            .env("SHARDS", shards)
            .env("PATH", path_with_gpucarve());
        run_ok(&mut sh);
    }
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(&mscript)
        .env("CASE", &case)
        .env("SHARDS", shards)
        .env("PATH", path_with_gpucarve());
    run_ok(&mut sh);
    let single = d.path().join("single");
    single_carve(&img, &single, &OPTS);
    assert_same_carving(&case.join("all"), &single);
}
