"""Planning: card -> EnginePlan, pure. Hardware facts (NVML, the CPU, --assume-gpu), the profiles (one function per
decision, each returning its value and its reason), the tutorial's lines, and the plan records the engine reads.
Nothing here imports the engine or the UI."""
