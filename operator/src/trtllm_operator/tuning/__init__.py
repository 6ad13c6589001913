"""trtllm-bench reports: parsing (:mod:`.report`) and the benchmark Job's in-container script
(:mod:`.bench_script`)."""
