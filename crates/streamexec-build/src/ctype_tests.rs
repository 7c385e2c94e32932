use super::*;

fn env() -> TypeEnv {
    let mut env = TypeEnv::default();
    env.records.insert(
        "0x1".into(),
        Record {
            c_name: "Params".into(),
            rust_name: "Params".into(),
            fields: vec![
                ("a".into(), "float".into()),
                ("c".into(), "double".into()),
                ("d".into(), "char".into()),
            ],
        },
    );
    env.record_names.insert("Params".into(), "0x1".into());
    env.typedefs
        .insert("u64t".into(), Typedef::Type("unsigned long long".into()));
    env.typedefs
        .insert("P".into(), Typedef::Record("0x1".into()));
    env
}

fn rust(text: &str, opencl: bool) -> Result<String, String> {
    let env = env();
    parse(text, &env, opencl).map(|t| launcher_rust(&t, &env, ""))
}

#[test]
fn c_scalars_map_to_their_rust_types() {
    for (c, r) in [
        ("float", "f32"),
        ("double", "f64"),
        ("int", "i32"),
        ("const int", "i32"),
        ("unsigned int", "u32"),
        ("unsigned", "u32"),
        ("long long", "i64"),
        ("int64_t", "i64"),
        ("unsigned long long", "u64"),
        ("uint64_t", "u64"),
        ("unsigned long", "u64"),
        ("size_t", "u64"),
        ("bool", "bool"),
        ("_Bool", "bool"),
        ("char", "i8"),
        ("unsigned char", "u8"),
        ("short", "i16"),
        ("unsigned short", "u16"),
        ("__private uint", "u32"),
        ("__private ulong", "u64"),
        ("u64t", "u64"),
    ] {
        assert_eq!(rust(c, false).as_deref(), Ok(r), "{c}");
    }
}

#[test]
fn pointers_are_device_pointers_and_local_pointers_shared_memory() {
    assert_eq!(
        rust("float *", false).unwrap(),
        "::streamexec::DevicePtr<f32>"
    );
    assert_eq!(
        rust("const int *__restrict", false).unwrap(),
        "::streamexec::DevicePtr<i32>"
    );
    assert_eq!(
        rust("void *", false).unwrap(),
        "::streamexec::DevicePtr<u8>"
    );
    assert_eq!(
        rust("bool *", false).unwrap(),
        "::streamexec::DevicePtr<u8>"
    );
    assert_eq!(
        rust("Params *", false).unwrap(),
        "::streamexec::DevicePtr<Params>"
    );
    assert_eq!(
        rust("const __global int *__private", true).unwrap(),
        "::streamexec::DevicePtr<i32>"
    );
    assert_eq!(
        rust("__constant float *__private", true).unwrap(),
        "::streamexec::DevicePtr<f32>"
    );
    assert_eq!(
        rust("__local float *__private", true).unwrap(),
        "::streamexec::SharedMemory<f32>"
    );
    // OpenCL pointers need an address space.
    assert!(rust("float *", true).unwrap_err().contains("__global"));
}

#[test]
fn structs_by_value_resolve_through_names_and_typedefs() {
    assert_eq!(rust("Params", false).unwrap(), "Params");
    assert_eq!(rust("P", false).unwrap(), "Params");
    assert_eq!(rust("__private P", true).unwrap(), "Params");
    let env = env();
    // float @0, double @8, char @16, size 24, align 8.
    assert_eq!(layout(&CType::Record("0x1".into()), &env), Ok((24, 8)));
    let arr = parse("float[3]", &env, false).unwrap();
    assert_eq!(layout(&arr, &env), Ok((12, 4)));
    assert_eq!(pod_rust(&arr, &env, ""), "[f32; 3]");
}

#[test]
fn types_without_a_faithful_rust_counterpart_are_refused_with_the_reason() {
    for (c, needle) in [
        ("long double", "long double"),
        ("half", "half-precision"),
        ("__fp16", "half-precision"),
        ("void (*)(int)", "function pointers"),
        ("float &", "references"),
        ("float **", "pointers to pointers"),
        ("enum Color", "enums"),
        ("union U", "unions"),
        ("__int128", "128-bit"),
        ("float __attribute__((ext_vector_type(4)))", "vector"),
        ("Mystery", "not a type"),
    ] {
        let err = rust(c, false).unwrap_err();
        assert!(err.contains(needle), "{c}: {err}");
    }
}

#[test]
fn pointers_inside_structs_are_refused() {
    let mut env = env();
    env.records.insert(
        "0x2".into(),
        Record {
            c_name: "WithPtr".into(),
            rust_name: "WithPtr".into(),
            fields: vec![("p".into(), "float *".into())],
        },
    );
    let err = record_fields("0x2", &env).unwrap_err();
    assert!(err.contains("pointer"), "{err}");
}
