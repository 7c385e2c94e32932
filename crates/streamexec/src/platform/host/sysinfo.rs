//! What the host platform reports about the machine (Linux `/proc`, with portable fallbacks).

pub(crate) struct HostInfo {
    pub(crate) cpu_name: String,
    pub(crate) vendor: String,
    pub(crate) cores: u32,
    pub(crate) clock_khz: Option<u32>,
    pub(crate) total_memory: u64,
    pub(crate) available_memory: Option<u64>,
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim())
}

fn meminfo_bytes(text: &str, key: &str) -> Option<u64> {
    field(text, key)?
        .split_whitespace()
        .next()?
        .parse::<u64>()
        .ok()
        .map(|kb| kb * 1024)
}

pub(crate) fn read() -> HostInfo {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    let arch = std::env::consts::ARCH;
    HostInfo {
        cpu_name: field(&cpuinfo, "model name")
            .map(str::to_string)
            .unwrap_or_else(|| format!("{arch} CPU")),
        vendor: field(&cpuinfo, "vendor_id")
            .unwrap_or("unknown")
            .to_string(),
        cores,
        clock_khz: field(&cpuinfo, "cpu MHz")
            .and_then(|v| v.parse::<f64>().ok())
            .map(|mhz| (mhz * 1000.0) as u32),
        // 16 GiB when /proc is not there: a safe guess for limits, never used for addresses.
        total_memory: meminfo_bytes(&meminfo, "MemTotal").unwrap_or(16 << 30),
        available_memory: meminfo_bytes(&meminfo, "MemAvailable"),
    }
}
