"""Words of the calculator and request pages, per language (ru, uz, en)."""

from __future__ import annotations

from sitebuild.ladder_block import WORDS as LADDER_WORDS
from sitebuild.sizing_labels import LABELS
from sizing.ladder import LEVERS


def words(lang: str) -> dict[str, str]:
    """Every word of the calculator pages in one language: the computed tables' labels, then the
    calculator's own (which win). The page gets them as data; sizing.view builds the results with them."""
    out = {key: values.get(lang, key) for key, values in LABELS.items()}
    out.update({key: values.get(lang, values["en"]) for key, values in TEXT.items()})
    return out


def T(lang: str, key: str) -> str:
    """The calculator's word for `key`, else the computed tables' label (sizing_labels), else the key."""
    values = TEXT.get(key) or LABELS.get(key)
    if values is None:
        return key
    return values.get(lang, values["en"])


TEXT: dict[str, dict[str, str]] = {
    "group_model": {"ru": "Модель", "uz": "Model", "en": "Model"},
    "group_precision": {"ru": "Метод и точность", "uz": "Usul va aniqlik", "en": "Method and precision"},
    "group_lora": {"ru": "Адаптер LoRA", "uz": "LoRA adapteri", "en": "LoRA adapter"},
    "group_batch": {"ru": "Батч и шаг", "uz": "Batch va qadam", "en": "Batch and step"},
    "group_gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    "group_time": {"ru": "Время и стоимость", "uz": "Vaqt va narx", "en": "Time and cost"},
    "f_model": {"ru": "Модель из каталога", "uz": "Katalogdagi model", "en": "Catalog model"},
    "f_model_config": {"ru": "Или config.json модели", "uz": "Yoki modelning config.json fayli",
                       "en": "Or the model's config.json"},
    "paste_config": {"ru": "Вставьте содержимое config.json", "uz": "config.json mazmunini qo‘ying",
                     "en": "Paste the contents of config.json"},
    "search_model": {"ru": "Поиск по каталогу: qwen, llama-3.1, 8b…", "uz": "Katalogdan qidirish: qwen, llama-3.1, "
                     "8b…", "en": "Search the catalog: qwen, llama-3.1, 8b…"},
    "upload_config": {"ru": "или загрузите файл:", "uz": "yoki faylni yuklang:", "en": "or upload the file:"},
    "e_config_too_big": {"ru": "Файл больше 1 МБ: это не config.json модели", "uz": "Fayl 1 MB dan katta: bu "
                         "modelning config.json fayli emas", "en": "The file is over 1 MB: not a model's config.json"},
    "method_full": {"ru": "full — полное дообучение", "uz": "full — to‘liq qo‘shimcha o‘qitish",
                    "en": "full — full fine-tuning"},
    "method_lora": {"ru": "lora — LoRA (DoRA: флажок ниже)", "uz": "lora — LoRA (DoRA: pastdagi belgi)",
                    "en": "lora — LoRA (DoRA: the box below)"},
    "method_qlora": {"ru": "qlora — QLoRA, 4-битная база", "uz": "qlora — QLoRA, 4-bit asos",
                     "en": "qlora — QLoRA, 4-bit base"},
    "method_lora8": {"ru": "lora8 — LoRA на 8-битной базе", "uz": "lora8 — 8-bit asosda LoRA",
                     "en": "lora8 — LoRA on an 8-bit base"},
    "f_framework": {"ru": "Фреймворк", "uz": "Freymvork", "en": "Framework"},
    "f_method": {"ru": "Метод", "uz": "Usul", "en": "Method"},
    "f_torch_dtype": {"ru": "Тип весов при загрузке", "uz": "Yuklashdagi vazn turi", "en": "Load dtype"},
    "f_bf16": {"ru": "Смешанная точность bf16", "uz": "bf16 aralash aniqlik", "en": "bf16 mixed precision"},
    "f_fp16": {"ru": "Смешанная точность fp16", "uz": "fp16 aralash aniqlik", "en": "fp16 mixed precision"},
    "f_bnb_4bit_quant_type": {"ru": "4-битный формат", "uz": "4-bit format", "en": "4-bit format"},
    "f_bnb_4bit_use_double_quant": {"ru": "Двойная квантизация", "uz": "Ikki bosqichli kvantlash",
                                    "en": "Double quantization"},
    "f_bnb_4bit_compute_dtype": {"ru": "Тип вычислений 4-битных слоёв", "uz": "4-bit qatlamlar hisoblash turi",
                                 "en": "4-bit compute dtype"},
    "f_r": {"ru": "Ранг", "uz": "Rang", "en": "Rank"},
    "f_lora_alpha": {"ru": "Альфа", "uz": "Alfa", "en": "Alpha"},
    "f_lora_dropout": {"ru": "Dropout", "uz": "Dropout", "en": "Dropout"},
    "f_target_modules": {"ru": "Целевые модули (all-linear или через запятую)",
                         "uz": "Maqsadli modullar (all-linear yoki vergul bilan)",
                         "en": "Target modules (all-linear or comma-separated)"},
    "f_use_dora": {"ru": "DoRA", "uz": "DoRA", "en": "DoRA"},
    "f_peft_type": {"ru": "Метод PEFT", "uz": "PEFT usuli", "en": "PEFT method"},
    "f_max_seq_length": {"ru": "Длина последовательности", "uz": "Ketma-ketlik uzunligi",
                         "en": "Sequence length"},
    "f_per_device_train_batch_size": {"ru": "Микробатч на GPU", "uz": "GPU uchun mikrobatch",
                                      "en": "Micro-batch per GPU"},
    "f_gradient_accumulation_steps": {"ru": "Накопление градиента", "uz": "Gradiyentlarni to‘plash",
                                      "en": "Gradient accumulation"},
    "f_eval_strategy": {"ru": "Оценка во время обучения", "uz": "O‘qitish davomida baholash",
                        "en": "Evaluation during training"},
    "f_per_device_eval_batch_size": {"ru": "Батч оценки на GPU", "uz": "GPU uchun baholash batchi",
                                     "en": "Evaluation batch per GPU"},
    "f_compute_metrics": {"ru": "compute_metrics при оценке (предсказания копятся на GPU)",
                          "uz": "Baholashda compute_metrics (bashoratlar GPU da to‘planadi)",
                          "en": "compute_metrics in evaluation (predictions kept on the GPU)"},
    "f_preprocess_logits_for_metrics": {"ru": "Что остаётся от логитов для метрик",
                                        "uz": "Metrikalar uchun logitlardan nima qoladi",
                                        "en": "What is kept of the logits for the metrics"},
    "f_eval_accumulation_steps": {"ru": "Батчей оценки до переноса предсказаний в CPU",
                                  "uz": "Bashoratlar CPU ga o‘tguncha baholash batchlari",
                                  "en": "Evaluation batches before the predictions move to the CPU"},
    "f_eval_samples": {"ru": "Последовательностей в наборе для оценки", "uz": "Baholash to‘plamidagi ketma-ketliklar",
                       "en": "Sequences in the evaluation set"},
    "f_batch_eval_metrics": {"ru": "batch_eval_metrics: метрики по батчам (предсказания не копятся)",
                             "uz": "batch_eval_metrics: metrikalar batchma-batch (bashoratlar to‘planmaydi)",
                             "en": "batch_eval_metrics: metrics batch by batch (no predictions pile up)"},
    "f_eval_do_concat_batches": {"ru": "Склеивать предсказания батчей оценки (eval_do_concat_batches)",
                                 "uz": "Baholash batchlari bashoratlarini ulash (eval_do_concat_batches)",
                                 "en": "Concatenate the evaluation batches' predictions (eval_do_concat_batches)"},
    "f_eval_steps": {"ru": "Шагов между оценками (eval_steps)", "uz": "Baholashlar orasidagi qadamlar (eval_steps)",
                     "en": "Steps between evaluations (eval_steps)"},
    "f_packing": {"ru": "Упаковка последовательностей", "uz": "Ketma-ketliklarni zichlash", "en": "Packing"},
    "f_gradient_checkpointing": {"ru": "Пересчёт активаций (gradient checkpointing)",
                                 "uz": "Aktivatsiyalarni qayta hisoblash (gradient checkpointing)",
                                 "en": "Gradient checkpointing"},
    "f_attn_implementation": {"ru": "Внимание", "uz": "Attention", "en": "Attention"},
    "f_optim": {"ru": "Оптимизатор", "uz": "Optimizator", "en": "Optimizer"},
    "f_gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    "f_num_gpus": {"ru": "Число GPU", "uz": "GPU soni", "en": "Number of GPUs"},
    "f_parallelism": {"ru": "Параллелизм", "uz": "Parallellik", "en": "Parallelism"},
    "f_dataset_tokens": {"ru": "Токенов в датасете", "uz": "Datasetdagi tokenlar", "en": "Dataset tokens"},
    "f_num_train_epochs": {"ru": "Эпох", "uz": "Epoxalar", "en": "Epochs"},
    "f_price_per_gpu_hour": {"ru": "Цена GPU-часа", "uz": "GPU-soat narxi", "en": "Price per GPU-hour"},
    "status_static": {"ru": "Показан расчёт для настроек по умолчанию; калькулятор загружается…",
                      "uz": "Standart sozlamalar uchun hisob ko‘rsatilgan; kalkulyator yuklanmoqda…",
                      "en": "Showing the default configuration; the calculator is loading…"},
    "status_ready": {"ru": "Калькулятор готов: числа пересчитываются при изменении полей.",
                     "uz": "Kalkulyator tayyor: maydonlar o‘zgarganda raqamlar qayta hisoblanadi.",
                     "en": "The calculator is ready: numbers update as you edit the fields."},
    "status_busy": {"ru": "Пересчёт…", "uz": "Qayta hisoblanmoqda…", "en": "Recomputing…"},
    "status_failed": {"ru": "Калькулятор не загрузился: ", "uz": "Kalkulyator yuklanmadi: ",
                      "en": "The calculator failed to load: "},
    "not_installed": {"ru": "среда выполнения калькулятора не установлена", "uz": "kalkulyator muhiti "
                      "o‘rnatilmagan", "en": "calculator runtime not installed"},
    "bad_mime": {"ru": "сервер отдаёт .wasm не как application/wasm", "uz": "server .wasm ni application/wasm "
                 "sifatida bermayapti", "en": "the server does not serve .wasm as application/wasm"},
    "timeout": {"ru": "Pyodide не запустился за 90 с после загрузки файлов", "uz": "Pyodide fayllar yuklangach 90 s "
                "ichida ishga tushmadi", "en": "Pyodide did not start within 90 s of the downloads"},
    "stalled": {"ru": "загрузка остановилась (20 с без данных)", "uz": "yuklash to‘xtab qoldi (20 s davomida "
                "ma’lumot kelmadi)", "en": "the download stalled (no data for 20 s)"},
    "error": {"ru": "внутренняя ошибка калькулятора", "uz": "kalkulyatorning ichki xatosi",
              "en": "an internal error of the calculator"},
    "http": {"ru": "сервер не отдал файл калькулятора", "uz": "server kalkulyator faylini bermadi",
             "en": "the server did not serve a calculator file"},
    "retry": {"ru": "Загрузить снова", "uz": "Qayta yuklash", "en": "Load again"},
    "status_link": {"ru": "Считается ваша конфигурация: калькулятор загружается…",
                    "uz": "Sizning konfiguratsiyangiz hisoblanmoqda: kalkulyator yuklanmoqda…",
                    "en": "Computing your configuration: the calculator is loading…"},
    "status_prerendered": {"ru": "Числа ниже для вашей конфигурации посчитаны при сборке сайта; калькулятор "
                           "загружается и пересчитает их.", "uz": "Pastdagi raqamlar sizning konfiguratsiyangiz "
                           "uchun sayt yig‘ilganda hisoblangan; kalkulyator yuklanmoqda va ularni qayta hisoblaydi.",
                           "en": "The numbers below for your configuration were computed when the site was built; "
                           "the calculator is loading to confirm them."},
    "adapt_length": {"ru": "Длина последовательности: {value} — максимум этой модели (max_position_embeddings).",
                     "uz": "Ketma-ketlik uzunligi: {value} — bu modelning maksimumi (max_position_embeddings).",
                     "en": "Sequence length set to {value}, the model's maximum (max_position_embeddings)."},
    "adapt_method": {"ru": "Метод: {value} вместо {was} — веса этой модели уже квантованы, и обучать их можно "
                     "только так.",
                     "uz": "Usul: {was} o‘rniga {value} — bu modelning vaznlari oldindan kvantlangan va faqat shu "
                     "usulda o‘qitiladi.", "en": "Method set to {value} instead of {was}: this model's weights are "
                     "already quantized and train only so."},
    "adapt_back": {"ru": "{field}: снова {value}.", "uz": "{field}: yana {value}.", "en": "{field}: back to {value}."},
    "status_prerendered_refused": {"ru": "Для вашей конфигурации оценки нет (проверено при сборке сайта): причина — "
                                   "над числами; калькулятор загружается и проверит снова.",
                                   "uz": "Sizning konfiguratsiyangiz uchun baho yo‘q (sayt yig‘ilganda tekshirilgan): "
                                   "sababi raqamlar ustida; kalkulyator yuklanmoqda va qayta tekshiradi.",
                                   "en": "No estimate for your configuration (checked when the site was built): the "
                                   "reason is above the numbers; the calculator is loading to check again."},
    "status_refused": {"ru": "Для этой конфигурации оценки нет: причина — над числами.", "uz": "Bu konfiguratsiya "
                       "uchun baho yo‘q: sababi raqamlar ustida.",
                       "en": "No estimate for this configuration: the reason is above the numbers."},
    "status_build_numbers": {"ru": "Числа ниже посчитаны при сборке сайта для настроек по умолчанию.",
                             "uz": "Pastdagi raqamlar sayt yig‘ilganda standart sozlamalar uchun hisoblangan.",
                             "en": "The numbers below were computed when the site was built, for the default "
                             "configuration."},
    "status_build_link": {"ru": "Числа ниже посчитаны при сборке сайта для этой конфигурации.",
                          "uz": "Pastdagi raqamlar sayt yig‘ilganda shu konfiguratsiya uchun hisoblangan.",
                          "en": "The numbers below were computed when the site was built, for this configuration."},
    "no_worker": {"ru": "браузер не поддерживает модульные Web Worker", "uz": "brauzer modul Web Workerni "
                  "qo‘llamaydi", "en": "this browser has no module Web Workers"},
    "noscript": {"ru": "Калькулятору нужен JavaScript: выше — расчёт для настроек по умолчанию. Любую конфигурацию "
                 "считает и командная строка: python -m sizing estimate config.json.",
                 "uz": "Kalkulyatorga JavaScript kerak: yuqorida standart sozlamalar uchun hisob. Istalgan "
                 "konfiguratsiyani buyruq qatori ham hisoblaydi: python -m sizing estimate config.json.",
                 "en": "The calculator needs JavaScript: above are the results for the default configuration. The "
                 "command line computes any configuration: python -m sizing estimate config.json."},
    "p_param": {"ru": "Параметр", "uz": "Parametr", "en": "Parameter"},
    "p_field": {"ru": "Поле", "uz": "Maydon", "en": "Field"},
    "p_default": {"ru": "По умолчанию", "uz": "Standart qiymat", "en": "Default"},
    "p_doc": {"ru": "Что означает", "uz": "Nimani anglatadi", "en": "Meaning"},
    "tri_default": {"ru": "Как у фреймворка", "uz": "Freymvork standarti", "en": "Framework default"},
    "tri_on": {"ru": "Включено", "uz": "Yoqilgan", "en": "On"},
    "tri_off": {"ru": "Выключено", "uz": "O‘chirilgan", "en": "Off"},
    "download": {"ru": "Скачать конфигурацию JSON", "uz": "Konfiguratsiyani JSON qilib yuklash",
                 "en": "Download the config JSON"},
    "copy_snippet": {"ru": "Копировать код Python", "uz": "Python kodini nusxalash", "en": "Copy the Python snippet"},
    "copy_trial": {"ru": "Копировать команду пробного запуска", "uz": "Sinov buyrug‘ini nusxalash",
                   "en": "Copy the trial command"},
    "copied": {"ru": "Скопировано", "uz": "Nusxalandi", "en": "Copied"},
    "components": {"ru": "Состав пика памяти", "uz": "Xotira cho‘qqisi tarkibi", "en": "What the peak is made of"},
    "time_line": {"ru": "Время обучения:", "uz": "O‘qitish vaqti:", "en": "Training time:"},
    "hours": {"ru": "ч", "uz": "soat", "en": "h"},
    "eval_hours": {"ru": "из них проходы оценки", "uz": "shundan baholash o‘tishlari", "en": "of which evaluation"},
    "step": {"ru": "шаг оптимизатора", "uz": "optimizator qadami", "en": "optimizer step"},
    "tps": {"ru": "токенов/с", "uz": "token/s", "en": "tokens/s"},
    "cost": {"ru": "стоимость", "uz": "narx", "en": "cost"},
    "th_gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    "th_fits": {"ru": "Помещается", "uz": "Sig‘adi", "en": "Fits"},
    # a card refused for its precision, not its memory (sizing.solve: refusal gpu_no_bf16)
    "fit_no_bf16": {"ru": "✗ нет bf16", "uz": "✗ bf16 yo‘q", "en": "✗ no bf16"},
    "th_headroom": {"ru": "Запас, ГиБ", "uz": "Zaxira, GiB", "en": "Headroom, GiB"},
    "th_batch": {"ru": "Макс. микробатч", "uz": "Maks. mikrobatch", "en": "Max micro-batch"},
    "th_seq": {"ru": "Макс. длина", "uz": "Maks. uzunlik", "en": "Max length"},
    "th_gpus": {"ru": "Мин. число GPU", "uz": "Min. GPU soni", "en": "Fewest GPUs"},
    "th_hours": {"ru": "Часы", "uz": "Soat", "en": "Hours"},
    "th_cost": {"ru": "Стоимость", "uz": "Narx", "en": "Cost"},
    # errors from sizing, by SizingError.code ({field} and the params are filled in by calculator.js)
    "e_wrong_type": {"ru": "Неверный тип значения поля {field}", "uz": "{field} maydoni qiymat turi noto‘g‘ri",
                     "en": "{field} has the wrong type"},
    "e_out_of_range": {"ru": "{field}: допустимо от {min} до {max}", "uz": "{field}: {min} dan {max} gacha bo‘lishi "
                       "kerak", "en": "{field} must be between {min} and {max}"},
    "e_invalid_value": {"ru": "{field}: недопустимое значение", "uz": "{field}: yaroqsiz qiymat",
                        "en": "{field}: not an allowed value"},
    "e_missing_field": {"ru": "Выберите модель или вставьте config.json", "uz": "Model tanlang yoki config.json "
                        "qo‘ying", "en": "Choose a model or paste a config.json"},
    "e_conflict": {"ru": "Несовместимые параметры ({field})", "uz": "Mos kelmaydigan parametrlar ({field})",
                   "en": "Conflicting settings ({field})"},
    "e_conflict_expected": {"ru": "{field}: здесь нужно {expected}, а не {value}", "uz": "{field}: bu yerda {value} "
                            "emas, {expected} kerak", "en": "{field} must be {expected} here, not {value}"},
    "e_rank_too_large": {"ru": "r={value} больше ширины целевого слоя ({max})", "uz": "r={value} maqsadli qatlam "
                         "kengligidan ({max}) katta", "en": "r={value} exceeds the width of a targeted layer ({max})"},
    "e_seq_too_long": {"ru": "max_seq_length {value} больше, чем поддерживает модель ({max})", "uz": "max_seq_length "
                       "{value} model qo‘llaydigandan ({max}) katta",
                       "en": "max_seq_length {value} exceeds what the model supports ({max})"},
    "e_unknown_field": {"ru": "Неизвестное поле {field}", "uz": "Noma’lum maydon {field}",
                        "en": "Unknown field {field}"},
    "e_gpu_required": {"ru": "Для этого ответа нужен GPU: выберите его", "uz": "Bu javob uchun GPU kerak: uni tanlang",
                       "en": "This answer needs a GPU: choose one"},
    "e_unknown_gpu": {"ru": "GPU нет в каталоге", "uz": "GPU katalogda yo‘q", "en": "The GPU is not in the catalog"},
    "e_unknown_model": {"ru": "Модели нет в каталоге", "uz": "Model katalogda yo‘q",
                        "en": "The model is not in the catalog"},
    "e_unknown_target_module": {"ru": "В модели нет такого модуля", "uz": "Modelda bunday modul yo‘q",
                                "en": "The model has no such module"},
    "e_unsupported_architecture": {"ru": "Эта архитектура не поддерживается", "uz": "Bu arxitektura "
                                   "qo‘llab-quvvatlanmaydi", "en": "This architecture is not supported"},
    "e_model_config_invalid": {"ru": "config.json не описывает поддерживаемую модель", "uz": "config.json "
                               "qo‘llanadigan modelni tavsiflamaydi",
                               "en": "The config.json does not describe a supported model"},
    "e_encoder_decoder_unsupported": {
        "ru": "Модели «энкодер-декодер» (T5, BART) не поддерживаются, только декодерные",
        "uz": "Enkoder-dekoder modellari (T5, BART) qo‘llab-quvvatlanmaydi, faqat dekoderli",
        "en": "Encoder-decoder models (T5, BART) are not supported, decoder-only ones are"},
    "e_unsupported_quantization": {
        "ru": "Этот формат квантизации не поддерживается (есть GPTQ, AWQ, bitsandbytes)",
        "uz": "Bu kvantlash formati qo‘llab-quvvatlanmaydi (GPTQ, AWQ, bitsandbytes bor)",
        "en": "This quantization format is not supported (GPTQ, AWQ, bitsandbytes are)"},
    "e_eval_samples_required": {
        "ru": "С compute_metrics оценка хранит предсказания всего набора: укажите число последовательностей в "
              "eval_samples",
        "uz": "compute_metrics bilan baholash butun to‘plam bashoratlarini saqlaydi: ketma-ketliklar sonini "
              "eval_samples da kiriting",
        "en": "With compute_metrics the evaluation keeps the whole set's predictions: give its number of sequences "
              "in eval_samples"},
    "e_target_modules_required": {
        "ru": "У PEFT нет модулей по умолчанию для этой модели: укажите target_modules",
        "uz": "PEFT’da bu model uchun standart modullar yo‘q: target_modules ni kiriting",
        "en": "PEFT has no default modules for this model: set target_modules"},
    "e_feedforward_modules_required": {
        "ru": "У PEFT нет feedforward_modules IA3 по умолчанию для этой модели: укажите их (среди target_modules)",
        "uz": "PEFT’da bu model uchun standart IA3 feedforward_modules yo‘q: ularni kiriting (target_modules ichidan)",
        "en": "PEFT has no default IA3 feedforward_modules for this model: set them (among target_modules)"},
    "e_target_not_linear": {
        "ru": "Эти модули не nn.Linear (эксперты MoE в transformers 5): LoRA их не оборачивает",
        "uz": "Bu modullar nn.Linear emas (transformers 5 dagi MoE ekspertlari): LoRA ularni o‘ramaydi",
        "en": "These modules are not nn.Linear (MoE experts in transformers 5): LoRA cannot wrap them"},
    "e_bad_json": {"ru": "Это не JSON", "uz": "Bu JSON emas", "en": "This is not JSON"},
    "e_json_syntax": {"ru": "Это не JSON: ошибка в строке {line}, столбце {column}", "uz": "Bu JSON emas: "
                      "{line}-qator, {column}-ustunda xato", "en": "This is not JSON: error at line {line}, column "
                      "{column}"},
    "e_json_too_deep": {"ru": "JSON вложен глубже {max} уровней: это не config.json модели", "uz": "JSON {max} "
                        "darajadan chuqur joylashgan: bu model config.json fayli emas",
                        "en": "The JSON nests deeper than {max} levels: this is not a model's config.json"},
    "e_duplicate_key": {"ru": "Поле {field} задано в конфигурации дважды: оставьте одно значение",
                        "uz": "{field} maydoni konfiguratsiyada ikki marta berilgan: bitta qiymat qoldiring",
                        "en": "The configuration sets {field} twice: keep one value"},
    "e_not_utf8": {"ru": "Файл не в кодировке UTF-8", "uz": "Fayl UTF-8 kodlashida emas",
                   "en": "The file is not UTF-8 text"},
    "e_invalid_config": {"ru": "Конфигурация должна быть объектом JSON", "uz": "Konfiguratsiya JSON obyekti "
                         "bo‘lishi kerak", "en": "The configuration must be a JSON object"},
    "e_internal": {"ru": "Расчёт не удался", "uz": "Hisoblash muvaffaqiyatsiz", "en": "The computation failed"},
    "e_other": {"ru": "Ошибка", "uz": "Xato", "en": "Error"},
    "copy_form": {"ru": "Здесь на HTML-странице — форма с полями конфигурации; их имена и значения по умолчанию — "
                  "в таблице параметров ниже, результаты выше посчитаны для этих значений.",
                  "uz": "Bu yerda HTML sahifada konfiguratsiya maydonlari bilan forma bor; ularning nomlari va "
                  "standart qiymatlari quyidagi parametrlar jadvalida, yuqoridagi natijalar shu qiymatlar uchun.",
                  "en": "Here the HTML page has the form with the configuration's fields; their names and defaults "
                  "are in the table of parameters below, and the results above are for those defaults."},
    "to_request": {"ru": "Составить запрос на аренду GPU с этой конфигурацией →",
                   "uz": "Ushbu konfiguratsiya bilan GPU ijarasi so‘rovini tuzish →",
                   "en": "Write a GPU rental request with this configuration →"},
    # the rental request page: r_* label the form, rq_* are the words request.js writes
    "r_legend": {"ru": "Что ещё нужно провайдеру", "uz": "Provayderga yana nima kerak",
                 "en": "What else the provider needs"},
    "r_model_revision": {"ru": "Ревизия модели (хеш коммита)", "uz": "Model reviziyasi (commit xeshi)",
                         "en": "Model revision (commit hash)"},
    "r_gated": {"ru": "Модель с ограниченным доступом (gated)", "uz": "Cheklangan kirishli model (gated)",
                "en": "The model is gated"},
    "r_examples": {"ru": "Число примеров", "uz": "Misollar soni", "en": "Number of examples"},
    "r_term": {"ru": "Срок аренды", "uz": "Ijara muddati", "en": "Rental term"},
    "r_interruptible": {"ru": "Допустимы прерывания (spot)", "uz": "Uzilishlar mumkin (spot)",
                        "en": "Interruptions are acceptable (spot)"},
    "r_storage_gb": {"ru": "Локальный диск, ГБ", "uz": "Mahalliy disk, GB", "en": "Local disk, GB"},
    "r_host_ram_gb": {"ru": "Оперативная память хоста, ГБ", "uz": "Xost operativ xotirasi, GB", "en": "Host RAM, GB"},
    "r_region": {"ru": "Регион", "uz": "Mintaqa", "en": "Region"},
    "r_notes": {"ru": "Примечания (без токенов и паролей)", "uz": "Izohlar (tokenlar va parollarsiz)",
                "en": "Notes (no tokens or passwords)"},
    "r_back": {"ru": "← Вернуться в калькулятор с этой конфигурацией", "uz": "← Ushbu konfiguratsiya bilan "
               "kalkulyatorga qaytish", "en": "← Back to the calculator with this configuration"},
    "r_copy": {"ru": "Копировать запрос", "uz": "So‘rovni nusxalash", "en": "Copy the request"},
    "r_download": {"ru": "Скачать запрос (.txt)", "uz": "So‘rovni yuklash (.txt)", "en": "Download the request (.txt)"},
    "rq_title": {"ru": "# Запрос на аренду GPU для дообучения", "uz": "# Qo‘shimcha o‘qitish uchun GPU ijarasi so‘rovi",
                 "en": "# GPU rental request for fine-tuning"},
    "rq_s_model": {"ru": "Модель", "uz": "Model", "en": "Model"},
    "rq_s_method": {"ru": "Метод и настройки обучения", "uz": "Usul va o‘qitish sozlamalari",
                    "en": "Method and training settings"},
    "rq_s_data": {"ru": "Данные и срок", "uz": "Ma’lumotlar va muddat", "en": "Data and term"},
    "rq_s_gpu": {"ru": "GPU и хост", "uz": "GPU va xost", "en": "GPU and host"},
    "rq_s_estimate": {"ru": "Оценка (не измерение; sizing)", "uz": "Baho (o‘lchov emas; sizing)",
                      "en": "Estimate (not a measurement; sizing)"},
    "rq_s_measured": {"ru": "Измерено пробным запуском (trial.py)", "uz": "Sinov ishga tushirishda o‘lchangan "
                      "(trial.py)", "en": "Measured by a trial run (trial.py)"},
    "rq_step_time": {"ru": "Время шага оптимизатора", "uz": "Optimizator qadami vaqti", "en": "Optimizer step time"},
    "rq_s_notes": {"ru": "Примечания", "uz": "Izohlar", "en": "Notes"},
    "rq_model": {"ru": "Модель", "uz": "Model", "en": "Model"},
    "rq_custom_model": {"ru": "своя (config.json — ниже)", "uz": "o‘zimizniki (config.json — quyida)",
                        "en": "custom (config.json below)"},
    "rq_custom_model_bad": {"ru": "своя, но её config.json не читается как JSON (не приложен)",
                            "uz": "o‘zimizniki, lekin config.json JSON sifatida o‘qilmaydi (ilova qilinmagan)",
                            "en": "custom, but its config.json is not valid JSON (not attached)"},
    "rq_s_config": {"ru": "config.json модели", "uz": "Modelning config.json fayli", "en": "The model's config.json"},
    "rq_revision": {"ru": "Ревизия", "uz": "Reviziya", "en": "Revision"},
    "rq_gated": {"ru": "Ограниченный доступ", "uz": "Cheklangan kirish", "en": "Gated"},
    "rq_yes": {"ru": "да", "uz": "ha", "en": "yes"},
    "rq_no": {"ru": "нет", "uz": "yo‘q", "en": "no"},
    "rq_tokens": {"ru": "Токенов в датасете", "uz": "Datasetdagi tokenlar", "en": "Dataset tokens"},
    "rq_examples": {"ru": "Примеров", "uz": "Misollar", "en": "Examples"},
    "rq_epochs": {"ru": "Эпох", "uz": "Epoxalar", "en": "Epochs"},
    "rq_term": {"ru": "Срок", "uz": "Muddat", "en": "Term"},
    "rq_interruptible": {"ru": "Прерывания допустимы", "uz": "Uzilishlar mumkin", "en": "Interruptible"},
    "rq_storage": {"ru": "Диск", "uz": "Disk", "en": "Disk"},
    "rq_gpu": {"ru": "GPU", "uz": "GPU", "en": "GPU"},
    "rq_count": {"ru": "Число GPU", "uz": "GPU soni", "en": "GPU count"},
    "rq_host_ram": {"ru": "ОЗУ хоста", "uz": "Xost xotirasi", "en": "Host RAM"},
    "rq_region": {"ru": "Регион", "uz": "Mintaqa", "en": "Region"},
    "rq_peak_device": {"ru": "Пик по nvidia-smi", "uz": "nvidia-smi bo‘yicha cho‘qqi", "en": "Peak (nvidia-smi)"},
    "rq_peak_reserved": {"ru": "Пик reserved", "uz": "reserved cho‘qqisi", "en": "Peak reserved"},
    "rq_fits": {"ru": "Помещается", "uz": "Sig‘adi", "en": "Fits"},
    "rq_headroom": {"ru": "запас", "uz": "zaxira", "en": "headroom"},
    "rq_throughput": {"ru": "Пропускная способность", "uz": "O‘tkazuvchanlik", "en": "Throughput"},
    "rq_hours": {"ru": "Часов обучения", "uz": "O‘qitish soatlari", "en": "Training hours"},
    "rq_no_estimate": {"ru": "оценка не получена", "uz": "baho olinmadi", "en": "no estimate"},
    "rq_footer": {"ru": "Токены, ключи и пароли в запрос не входят: доступ настраиваю сам после получения машины.",
                  "uz": "Tokenlar, kalitlar va parollar so‘rovga kirmaydi: kirishni mashinani olgach o‘zim sozlayman.",
                  "en": "No tokens, keys or passwords are included: I set up access myself once the machine is mine."},
    "rq_secret": {"ru": "Похоже на секрет (токен, ключ или пароль): в запрос не включается. Удалите его.",
                  "uz": "Maxfiy ma’lumotga o‘xshaydi (token, kalit yoki parol): so‘rovga kiritilmaydi. Uni o‘chiring.",
                  "en": "This looks like a secret (token, key or password): it is refused. Remove it."},
    "rq_refused": {"ru": "Запрос не составлен: уберите секреты из полей:", "uz": "So‘rov tuzilmadi: maydonlardan "
                   "maxfiy ma’lumotlarni olib tashlang:", "en": "No request: remove the secrets from these fields:"},
    "rq_runtime_failed": {"ru": "Оценка недоступна: ", "uz": "Baho mavjud emas: ", "en": "No estimate: "},
    "compare_title": {"ru": "H100 и H200 для этой конфигурации", "uz": "Ushbu konfiguratsiya uchun H100 va H200",
                      "en": "H100 and H200 for this configuration"},
    "compare_note": {"ru": "Время и стоимость — на наименьшем числе GPU, на котором запуск помещается, по введённой "
                     "цене GPU-часа.", "uz": "Vaqt va narx — ishga tushirish sig‘adigan eng kam GPU sonida, "
                     "kiritilgan GPU-soat narxi bo‘yicha.", "en": "Time and cost are on the fewest GPUs that fit, "
                     "at the price per GPU-hour entered."},
    "fit_note": {"ru": "Макс. микробатч и длина: на выбранной карте — наибольшие, что помещаются; на остальных — "
                 "наибольшие из ряда значений, на котором воспроизводится аллокатор (4 шага на удвоение: …, 4096, "
                 "5120, 6144, 7168, 8192, …), поэтому они могут быть меньше настоящего предела до 20 %. Пока они "
                 "ищутся, в их ячейках стоит «…», а остальные столбцы уже посчитаны.",
                 "uz": "Maks. mikrobatch va uzunlik: tanlangan kartada — sig‘adigan eng kattasi; boshqalarida — "
                 "allokator qayta hisoblanadigan qatordagi eng kattasi (ikki barobarga 4 qadam: …, 4096, 5120, 6144, "
                 "7168, 8192, …), shuning uchun ular haqiqiy chegaradan 20 % gacha kichik bo‘lishi mumkin. Ular "
                 "qidirilayotganda kataklarida «…» turadi, qolgan ustunlar esa allaqachon hisoblangan.",
                 "en": "Max micro-batch and length: on the chosen card, the largest that fit; on the others, the "
                 "largest on the series the allocator is replayed at (4 steps per doubling: …, 4096, 5120, 6144, 7168, "
                 "8192, …), so they can be up to 20 % below the true limit. While they are being searched, their cells "
                 "show “…”; the other columns are already computed."},
    # the "it does not fit" ladder (sizing.ladder), shown when the run does not fit its GPU
    "ladder_title": {"ru": "Что изменить, чтобы поместилось", "uz": "Sig‘ishi uchun nimani o‘zgartirish kerak",
                     "en": "What to change so it fits"},
    "ladder_note": {"ru": "Каждая строка применяется поверх строк выше; время и GPU-часы на токен — относительно "
                    "строки выше.", "uz": "Har bir qator yuqoridagi qatorlar ustiga qo‘llanadi; token uchun vaqt va "
                    "GPU-soat — yuqoridagi qatorga nisbatan.", "en": "Each row applies on top of the rows above; "
                    "time and GPU-hours per token are against the row above."},
    "ladder_never": {"ru": "Ни один рычаг не помещает запуск на этот GPU.",
                     "uz": "Hech bir dastak ishga tushirishni bu GPUga sig‘dirmaydi.",
                     "en": "No lever makes the run fit this GPU."},
    "ladder_change": {"ru": "Что меняется", "uz": "Nima o‘zgaradi", "en": "Change"},
    "ladder_usable": {"ru": "доступно", "uz": "mavjud", "en": "usable"},
    "ladder_lever": {lang: LADDER_WORDS["lever"][lang] for lang in ("ru", "uz", "en")},
    "ladder_saves": {lang: LADDER_WORDS["saves"][lang] for lang in ("ru", "uz", "en")},
    "ladder_after": {lang: LADDER_WORDS["after"][lang] for lang in ("ru", "uz", "en")},
    "ladder_time": {lang: LADDER_WORDS["time"][lang] for lang in ("ru", "uz", "en")},
    "ladder_gpu_hours": {lang: LADDER_WORDS["gpu_hours"][lang] for lang in ("ru", "uz", "en")},
    "ladder_same": {lang: LADDER_WORDS["same"][lang] for lang in ("ru", "uz", "en")},
    "ladder_start": {lang: LADDER_WORDS["start"][lang] for lang in ("ru", "uz", "en")},
    # the levers in the guides' words (ladder_block), without the Markdown code marks
    **{f"ladder_{lever}": {lang: LADDER_WORDS[lever][lang].replace("`", "") for lang in ("ru", "uz", "en")}
       for lever in LEVERS},
    # an imported trial report (calc_report.js)
    "report_import": {"ru": "Загрузить отчёт пробного запуска (report.json):",
                      "uz": "Sinov ishga tushirish hisobotini yuklash (report.json):",
                      "en": "Import a trial report (report.json):"},
    "report_title": {"ru": "Измерено и оценено", "uz": "O‘lchangan va baholangan", "en": "Measured and estimated"},
    "report_status": {"ru": "Пробный запуск: {status}, шагов записано: {steps}", "uz": "Sinov: {status}, yozilgan "
                      "qadamlar: {steps}", "en": "Trial: {status}, {steps} step(s) recorded"},
    "report_oom": {"ru": "Запуску не хватило памяти на шаге {step} ({phase}).",
                   "uz": "Ishga tushirishga {step}-qadamda ({phase}) xotira yetmadi.",
                   "en": "The trial ran out of memory at step {step} ({phase})."},
    "report_range": {"ru": "Диапазон", "uz": "Oraliq", "en": "Range"},
    "report_diff": {"ru": "Оценка − измерение", "uz": "Baho − o‘lchov", "en": "Estimate − measured"},
    "report_step": {"ru": "Шаг оптимизатора, с", "uz": "Optimizator qadami, s", "en": "Optimizer step, s"},
    "report_reload": {"ru": "Адаптер после сохранения и загрузки даёт те же выходы",
                      "uz": "Saqlab qayta yuklangan adapter bir xil natija beradi",
                      "en": "The adapter gives the same outputs after save and reload"},
    "report_loss": {"ru": "потери на отложенной выборке до → после", "uz": "ajratilgan to‘plamdagi yo‘qotish oldin → "
                    "keyin", "en": "held-out loss before → after"},
    "report_before": {"ru": "Когда обучение началось, было зарезервировано {gib} ГиБ: столько оставили в кэше "
                      "загрузка модели и первая оценка.", "uz": "O‘qitish boshlanganda {gib} GiB zaxiralangan edi: "
                      "buni keshda model yuklanishi va birinchi baholash qoldirgan.",
                      "en": "{gib} GiB were reserved when training began: what loading the model and the first "
                      "evaluation left in the cache."},
    "report_floor": {"ru": "Пик reserved равен этому уровню, поэтому о самом шаге говорит allocated, а не reserved.",
                     "uz": "reserved cho‘qqisi shu darajaga teng, shuning uchun qadamning o‘zi haqida reserved emas, "
                     "allocated gapiradi.", "en": "The reserved peak is that level, so for the step itself compare "
                     "allocated, not reserved."},
    "report_not_measured": {"ru": "Не измерено", "uz": "O‘lchanmagan", "en": "Not measured"},
    "report_note": {"ru": "Оценка — для конфигурации из отчёта (она загружена в форму); пик оценки приходится на "
                    "фазу «{phase}», уверенность {confidence}. Разница в процентах — от измерения.",
                    "uz": "Baho hisobotdagi konfiguratsiya uchun (u formaga yuklandi); bahodagi cho‘qqi «{phase}» "
                    "bosqichida, ishonch {confidence}. Foizdagi farq o‘lchovga nisbatan.",
                    "en": "The estimate is for the report's configuration (now loaded into the form); its peak is in "
                    "the {phase} phase, confidence {confidence}. Differences are relative to the measurement."},
    "e_report_malformed": {"ru": "Это не отчёт пробного запуска (report.json из trial.py)",
                           "uz": "Bu sinov ishga tushirish hisoboti emas (trial.py dagi report.json)",
                           "en": "This is not a trial report (report.json from trial.py)"},
    "e_report_version": {"ru": "Версия формата отчёта не поддерживается", "uz": "Hisobot formati versiyasi "
                         "qo‘llab-quvvatlanmaydi", "en": "This report format version is not supported"},
    "e_report_too_big": {"ru": "Файл больше 5 МБ: это не отчёт пробного запуска", "uz": "Fayl 5 MB dan katta: bu sinov "
                         "hisoboti emas", "en": "The file is over 5 MB: not a trial report"},
    # the estimate's uncertainty
    "range": {"ru": "Диапазон (reserved)", "uz": "Oraliq (reserved)", "en": "Range (reserved)"},
    "confidence": {"ru": "уверенность", "uz": "ishonch", "en": "confidence"},
    "conf_high": {"ru": "высокая", "uz": "yuqori", "en": "high"},
    "conf_medium": {"ru": "средняя", "uz": "o‘rtacha", "en": "medium"},
    "conf_low": {"ru": "низкая", "uz": "past", "en": "low"},
    # reserved stopped at the named card's memory (sizing/card.py): what a larger card would reserve
    "ample": {"ru": "на карте с большей памятью зарезервировалось бы", "uz": "xotirasi kattaroq kartada zaxiralanardi",
              "en": "a card with more memory would reserve"},
    # warnings from sizing, by code ({gpu_name}, {num_gpus}, {percent}; {gib} is the `bytes` parameter in GiB)
    "w_does_not_fit": {
        "ru": "Не помещается в {gpu_name}: не хватает {gib} ГиБ. В таблице ниже — карты побольше, наименьшее число "
              "GPU, наибольший микробатч и наибольшая длина, которые помещаются.",
        "uz": "{gpu_name} ga sig‘maydi: {gib} GiB yetishmaydi. Quyidagi jadvalda kattaroq kartalar, eng kam GPU soni, "
              "sig‘adigan eng katta mikrobatch va eng katta uzunlik bor.",
        "en": "Does not fit {gpu_name}: {gib} GiB short. The table below lists larger cards, the fewest GPUs, and the "
              "largest micro-batch and longest sequence that fit."},
    "w_eval_peak": {
        "ru": "Пик приходится на проход оценки: {batch} последовательностей по {seq} токенов на GPU "
              "(per_device_eval_batch_size) — без градиентов, но с их логитами и функцией потерь одновременно. "
              "Меньший батч оценки снижает его.",
        "uz": "Cho‘qqi baholash o‘tishiga to‘g‘ri keladi: har bir GPU da {seq} tokenli {batch} ta ketma-ketlik "
              "(per_device_eval_batch_size) — gradientlarsiz, lekin ularning logitlari va yo‘qotish funksiyasi bir "
              "vaqtda. Kichikroq baholash batchi uni pasaytiradi.",
        "en": "The evaluation pass sets the peak: {batch} sequences of {seq} tokens per GPU "
              "(per_device_eval_batch_size), without gradients but with their logits and loss at once. A smaller "
              "evaluation batch lowers it."},
    "w_eval_predictions": {
        "ru": "Пик задают предсказания, которые оценка копит для compute_metrics: предсказания и метки {sequences} "
              "последовательностей по {seq} токенов лежат на GPU (пока не пройдут eval_accumulation_steps батчей "
              "или весь набор), а присоединение к ним очередного батча на миг держит их дважды: {gib} ГиБ. Снизят "
              "его preprocess_logits_for_metrics, оставляющий argmax, меньший eval_accumulation_steps или "
              "batch_eval_metrics.",
        "uz": "Cho‘qqini baholash compute_metrics uchun to‘playdigan bashoratlar belgilaydi: {seq} tokenli {sequences} "
              "ta ketma-ketlikning bashoratlari va belgilari GPU da turadi (eval_accumulation_steps batch yoki butun "
              "to‘plam o‘tguncha), navbatdagi batchni ularga qo‘shish esa bir lahza ularni ikki nusxada ushlaydi: "
              "{gib} GiB. Uni argmax qoldiradigan preprocess_logits_for_metrics, kichikroq eval_accumulation_steps "
              "yoki batch_eval_metrics pasaytiradi.",
        "en": "The predictions the evaluation keeps for compute_metrics set the peak: the predictions and labels of "
              "{sequences} sequences of {seq} tokens stay on the GPU (until eval_accumulation_steps batches or the "
              "whole set have passed), and adding each batch's to them holds them twice for a moment: {gib} GiB. A "
              "preprocess_logits_for_metrics that keeps the argmax, a smaller eval_accumulation_steps or "
              "batch_eval_metrics lowers it."},
    "w_eval_predictions_list": {
        "ru": "Пик задают предсказания, которые оценка копит для compute_metrics: предсказания и метки {sequences} "
              "последовательностей по {seq} токенов лежат на GPU, батч за батчем (пока не пройдут "
              "eval_accumulation_steps батчей или весь набор): {gib} ГиБ. Снизят его preprocess_logits_for_metrics, "
              "оставляющий argmax, меньший eval_accumulation_steps или batch_eval_metrics.",
        "uz": "Cho‘qqini baholash compute_metrics uchun to‘playdigan bashoratlar belgilaydi: {seq} tokenli {sequences} "
              "ta ketma-ketlikning bashoratlari va belgilari GPU da batchma-batch turadi (eval_accumulation_steps "
              "batch yoki butun to‘plam o‘tguncha): {gib} GiB. Uni argmax qoldiradigan preprocess_logits_for_metrics, "
              "kichikroq eval_accumulation_steps yoki batch_eval_metrics pasaytiradi.",
        "en": "The predictions the evaluation keeps for compute_metrics set the peak: the predictions and labels of "
              "{sequences} sequences of {seq} tokens stay on the GPU batch by batch (until eval_accumulation_steps "
              "batches or the whole set have passed): {gib} GiB. A preprocess_logits_for_metrics that keeps the "
              "argmax, a smaller eval_accumulation_steps or batch_eval_metrics lowers it."},
    "w_eval_predictions_batch": {
        "ru": "Пик задают предсказания и метки одного батча оценки для compute_metrics: {sequences} "
              "последовательностей по {seq} токенов, собранные со всех GPU, {gib} ГиБ. Снизят его "
              "preprocess_logits_for_metrics, оставляющий argmax, или меньший per_device_eval_batch_size.",
        "uz": "Cho‘qqini compute_metrics uchun bitta baholash batchining bashoratlari va belgilari belgilaydi: barcha "
              "GPU lardan yig‘ilgan {seq} tokenli {sequences} ta ketma-ketlik, {gib} GiB. Uni argmax qoldiradigan "
              "preprocess_logits_for_metrics yoki kichikroq per_device_eval_batch_size pasaytiradi.",
        "en": "One evaluation batch's predictions and labels for compute_metrics set the peak: {sequences} sequences "
              "of {seq} tokens gathered from every GPU, {gib} GiB. A preprocess_logits_for_metrics that keeps the "
              "argmax or a smaller per_device_eval_batch_size lowers it."},
    "w_logits_dominate": {
        "ru": "Логиты и функция потерь занимают {percent} % пика: его снизит поблочная или слитая кросс-энтропия "
              "(loss_implementation) либо меньше токенов в микробатче.",
        "uz": "Logitlar va yo‘qotish funksiyasi cho‘qqining {percent} foizini egallaydi: uni bo‘laklab yoki "
              "birlashtirib hisoblanadigan kross-entropiya (loss_implementation) yoki mikrobatchdagi kamroq token "
              "kamaytiradi.",
        "en": "The logits and the loss are {percent}% of the peak: a chunked or fused cross-entropy "
              "(loss_implementation) or fewer tokens per micro-batch lowers it."},
    "w_bnb_compute_fp32": {
        "ru": "bnb_4bit_compute_dtype = float32 (так по умолчанию в BitsAndBytesConfig): 4-битные слои вычисляются в "
              "fp32 — медленнее и с большим расходом памяти. Укажите bfloat16.",
        "uz": "bnb_4bit_compute_dtype = float32 (BitsAndBytesConfig da standart): 4-bit qatlamlar fp32 da "
              "hisoblanadi — sekinroq va ko‘proq xotira oladi. bfloat16 ni belgilang.",
        "en": "bnb_4bit_compute_dtype is float32 (the BitsAndBytesConfig default): the 4-bit layers compute in fp32, "
              "slower and with more memory. Set it to bfloat16."},
    "w_kbit_prep_checkpointing": {
        "ru": "prepare_model_for_kbit_training включает пересчёт активаций (gradient checkpointing, reentrant); "
              "оценка это учитывает.",
        "uz": "prepare_model_for_kbit_training aktivatsiyalarni qayta hisoblashni (gradient checkpointing, reentrant) "
              "yoqadi; baho buni hisobga oladi.",
        "en": "prepare_model_for_kbit_training switches gradient checkpointing on (reentrant); the estimate includes "
              "it."},
    "w_half_mismatch": {
        "ru": "Веса загружаются в {load}, а autocast считает в {cast}: он сохраняет приведённую копию каждого веса, "
              "который умножает, а остаточный поток становится fp32 (оценка учитывает и то и другое). Загрузка в "
              "{cast} (torch_dtype) убирает и то и другое.",
        "uz": "Vaznlar {load} da yuklanadi, autocast esa {cast} da hisoblaydi: u ko‘paytiradigan har bir vaznning "
              "o‘zgartirilgan nusxasini saqlaydi, qoldiq oqim esa fp32 bo‘ladi (baho ikkalasini ham hisoblaydi). "
              "{cast} da yuklash (torch_dtype) ikkalasini ham yo‘qotadi.",
        "en": "The weights load in {load} but autocast computes in {cast}: it saves a cast copy of every weight it "
              "multiplies, and the residual stream becomes fp32 (the estimate counts both). Loading in {cast} "
              "(torch_dtype) avoids both."},
    "w_kbit_prep_fp32": {
        "ru": "prepare_model_for_kbit_training переводит эмбеддинги, нормализации и lm_head в fp32, и остаточный поток "
              "тоже становится fp32.",
        "uz": "prepare_model_for_kbit_training embeddinglar, normalizatsiyalar va lm_head ni fp32 ga o‘tkazadi, qoldiq "
              "oqim ham fp32 bo‘ladi.",
        "en": "prepare_model_for_kbit_training casts the embeddings, norms and lm_head to fp32, and the residual "
              "stream becomes fp32 too."},
    "w_paged_optimizer": {
        "ru": "Страничные состояния оптимизатора ({gib} ГиБ) лежат в управляемой памяти CUDA: счётчики PyTorch их не "
              "видят, а при нехватке памяти они переезжают в ОЗУ хоста.",
        "uz": "Sahifali optimizator holatlari ({gib} GiB) CUDA boshqaradigan xotirada turadi: PyTorch hisoblagichlari "
              "ularni ko‘rmaydi, xotira yetmasa ular xost operativ xotirasiga ko‘chadi.",
        "en": "Paged optimizer states ({gib} GiB) live in CUDA managed memory: PyTorch's counters do not see them, "
              "and under memory pressure they move to host RAM."},
    "w_peft_method_approximate": {
        "ru": "Метод PEFT {method}: параметры, градиенты и состояния оптимизатора посчитаны точно, а сохранённые "
              "активации — приближённо (как у LoRA или у замороженной базы), поэтому точность оценки низкая.",
        "uz": "PEFT usuli {method}: parametrlar, gradiyentlar va optimizator holatlari aniq hisoblangan, saqlangan "
              "aktivatsiyalar esa taxminiy (LoRA yoki muzlatilgan asosdagidek), shuning uchun baho aniqligi past.",
        "en": "PEFT method {method}: parameters, gradients and optimizer states are exact, the saved activations "
              "are approximated (as LoRA's or the frozen base's), so the confidence is low."},
    "w_padded_upper_bound": {
        "ru": "Без упаковки батч дополняется до самого длинного примера: оценка дана для самого длинного батча "
              "(до max_seq_length), идущего первым, — так их упорядочивают пробный запуск и group_by_length=True "
              "в Trainer. Если длинные батчи идут после коротких, PyTorch держит освобождённые блоки коротких в кэше "
              "и зарезервированная память растёт сверх оценки, сильнее всего при большом словаре.",
        "uz": "Zichlashsiz batch eng uzun namunagacha to‘ldiriladi: baho eng uzun batch (max_seq_length gacha) "
              "birinchi keladigan hol uchun berilgan — sinov ishga tushirish va Trainer’dagi group_by_length=True "
              "ularni shunday tartiblaydi. Uzun batchlar qisqalaridan keyin kelsa, PyTorch qisqalarining bo‘shatilgan "
              "bloklarini keshda saqlaydi va zaxiralangan xotira bahodan oshadi, lug‘at katta bo‘lsa ayniqsa ko‘p.",
        "en": "Without packing a batch is padded to its longest sample: the estimate is for the longest batch (up to "
              "max_seq_length) coming first, as the trial run and the Trainer's group_by_length=True order them. When "
              "longer batches follow shorter ones, PyTorch keeps the shorter ones' freed blocks cached and reserved "
              "memory grows past the estimate, most with a large vocabulary."},
    "w_moe_experts_dropout": {
        "ru": "PEFT не может добавить LoRA к объединённым экспертам Transformers 5 при lora_dropout > 0 или с DoRA: "
              "get_peft_model завершится ошибкой ValueError. Поставьте lora_dropout = 0 или уберите экспертов из "
              "target_modules.",
        "uz": "PEFT lora_dropout > 0 yoki DoRA bilan Transformers 5 ning birlashtirilgan ekspertlariga LoRA qo‘sha "
              "olmaydi: get_peft_model ValueError xatosi bilan to‘xtaydi. lora_dropout = 0 qo‘ying yoki ekspertlarni "
              "target_modules dan chiqaring.",
        "en": "PEFT cannot add LoRA to Transformers 5's fused experts with lora_dropout > 0 or DoRA: get_peft_model "
              "stops with a ValueError. Set lora_dropout to 0 or leave the experts out of "
              "target_modules."},
    "w_moe_fused_experts": {
        "ru": "В Transformers 5 веса экспертов объединены в трёхмерные тензоры: bitsandbytes их не квантует (они "
              "остаются в типе загрузки, а после prepare_model_for_kbit_training — в fp32), а all-linear в PEFT "
              "добавляет к ним LoRA.",
        "uz": "Transformers 5 da ekspert vaznlari uch o‘lchamli tenzorlarga birlashtirilgan: bitsandbytes ularni "
              "kvantlamaydi (ular yuklash turida qoladi, prepare_model_for_kbit_training dan keyin esa fp32 bo‘ladi), "
              "PEFT’dagi all-linear esa ularga LoRA qo‘shadi.",
        "en": "In Transformers 5 the experts are fused 3-D weights: bitsandbytes does not quantize them (they stay "
              "in the load dtype, fp32 after prepare_model_for_kbit_training), and PEFT's all-linear adds LoRA to "
              "them."},
    "w_moe_approximate": {
        "ru": "Активации экспертов оценены приближённо: эксперты этого фреймворка (или запасной путь Transformers "
              "на картах до sm80) не измерены по операциям.",
        "uz": "Ekspertlar aktivatsiyalari taxminiy: bu freymvork ekspertlari (yoki sm80 dan eski kartalarda "
              "Transformers’ning zaxira yo‘li) amallar bo‘yicha o‘lchanmagan.",
        "en": "Expert activations are approximate: this framework's experts (or Transformers' fallback on cards "
              "before sm80) are not measured op by op."},
    "w_softcap_eager": {
        "ru": "Эта модель ограничивает оценки внимания (soft-capping), а SDPA так не умеет: transformers, LitGPT и "
              "torchtune считают внимание в режиме eager, с матрицей batch × heads × seq × seq в каждом слое; оценка "
              "это учитывает. flash_attention_2 делает ограничение внутри ядра.",
        "uz": "Bu model attention baholarini cheklaydi (soft-capping), SDPA esa buni qila olmaydi: transformers, "
              "LitGPT va torchtune attention’ni eager rejimida hisoblaydi, har bir qatlamda batch × heads × seq × seq "
              "matritsa bilan; baho buni hisobga oladi. flash_attention_2 cheklashni yadro ichida bajaradi.",
        "en": "This model soft-caps its attention scores, which SDPA cannot do: transformers, LitGPT and torchtune "
              "run eager attention, with a batch × heads × seq × seq matrix in every layer; the estimate includes "
              "it. flash_attention_2 applies the cap inside its kernel."},
    "w_moe_experts_not_adapted": {
        "ru": "Эксперты и маршрутизатор gpt-oss не являются модулями nn.Linear: target_modules в PEFT (и all-linear) "
              "добавляют LoRA только к проекциям внимания (LoRA на экспертах через target_parameters не "
              "моделируется), а bitsandbytes их не квантует (они остаются в типе загрузки, а после "
              "prepare_model_for_kbit_training — в fp32).",
        "uz": "gpt-oss ekspertlari va marshrutizatori nn.Linear modullari emas: PEFT’dagi target_modules (all-linear "
              "ham) LoRA’ni faqat e’tibor proyeksiyalariga qo‘shadi (target_parameters orqali ekspertlarga LoRA "
              "modellanmaydi), bitsandbytes esa ularni kvantlamaydi (ular yuklash turida qoladi, "
              "prepare_model_for_kbit_training dan keyin esa fp32 bo‘ladi).",
        "en": "gpt-oss's experts and router are not nn.Linear modules: PEFT's target_modules (all-linear too) add "
              "LoRA to its attention projections only (LoRA on the experts through target_parameters is not "
              "modelled), and bitsandbytes does not quantize them (they stay in the load dtype, fp32 after "
              "prepare_model_for_kbit_training)."},
    "w_sharding_approximate": {
        "ru": "Шардирование на {num_gpus} GPU: веса на каждом GPU включают два собранных слоя и нешардированный "
              "корневой блок FSDP (эмбеддинги, LM head); оценка приближённая.",
        "uz": "{num_gpus} ta GPU bo‘yicha bo‘lish (sharding): har bir GPU dagi vaznlarga ikkita yig‘ilgan qatlam va "
              "FSDP ning bo‘linmagan ildiz bloki (embeddinglar, LM head) kiradi; baho taxminiy.",
        "en": "Sharding over {num_gpus} GPUs: each GPU's weights include two gathered layers and FSDP's unsharded "
              "root unit (embeddings, LM head); approximate."},
    "w_load_above_logged_peak": {
        "ru": "Загрузка модели (квантизация весов в NF4 на GPU) выделяет {gib} ГиБ — больше, чем шаг обучения. "
              "torchtune сбрасывает счётчики пиков после подготовки модели, поэтому в его журнале "
              "(peak_memory_alloc) этого пика нет, но карта должна его вместить: вердикт о том, помещается ли "
              "запуск, его учитывает.",
        "uz": "Modelni yuklash (vaznlarni GPU da NF4 ga kvantlash) {gib} GiB ajratadi — o‘qitish qadamidan "
              "ko‘p. torchtune model tayyorlangandan keyin cho‘qqi hisoblagichlarini qaytadan boshlaydi, "
              "shuning uchun uning jurnalida (peak_memory_alloc) bu cho‘qqi ko‘rinmaydi, lekin karta uni "
              "sig‘dirishi kerak: sig‘ish xulosasi uni hisobga oladi.",
        "en": "The model load (weights quantized to NF4 on the GPU) allocates {gib} GiB, more than the training "
              "step. torchtune resets the peak counters after the model's setup, so its log (peak_memory_alloc) "
              "does not show this peak, but the card must hold it: the fit verdict counts it."},
    "w_compile_approximate": {
        "ru": "torch.compile объединяет ядра и меняет то, что сохраняется для обратного прохода: оценка приближённая.",
        "uz": "torch.compile yadrolarni birlashtiradi va teskari o‘tish uchun saqlanadiganlarni o‘zgartiradi: baho "
              "taxminiy.",
        "en": "torch.compile fuses kernels and changes what is saved for the backward pass: approximate."},
    "w_gpu_no_bf16": {
        "ru": "У {gpu_name} нет аппаратной поддержки bf16: PyTorch до версии 2.2 не запускает на ней обучение в bf16, "
              "более новые версии эмулируют bf16, медленно. Используйте fp16 и загрузите веса во float16: "
              "для LoRA и QLoRA памяти нужно столько же; полному дообучению под fp16 нужны веса fp32 (GradScaler не "
              "принимает градиенты fp16).",
        "uz": "{gpu_name} da bf16 uchun apparat qo‘llovi yo‘q: PyTorch 2.2 gacha unda bf16 o‘qitishni ishga "
              "tushirmaydi, yangi versiyalar bf16 ni sekin emulyatsiya qiladi. fp16 dan foydalaning va vaznlarni "
              "float16 da yuklang: LoRA va QLoRA uchun xotira shuncha kerak bo‘ladi; fp16 ostida to‘liq qo‘shimcha "
              "o‘qitishga fp32 vaznlar kerak (GradScaler fp16 gradientlarni qabul qilmaydi).",
        "en": "{gpu_name} has no bf16 hardware: PyTorch up to 2.2 refuses a bf16 run there, later releases emulate "
              "bf16, slowly. Use fp16 and load the weights in float16: the same memory for LoRA and QLoRA; full "
              "fine-tuning under fp16 needs fp32 weights (GradScaler refuses fp16 gradients)."},
    "w_gpu_no_flash_attention_2": {
        "ru": "{gpu_name} не поддерживает FlashAttention-2: выберите sdpa.",
        "uz": "{gpu_name} FlashAttention-2 ni qo‘llamaydi: sdpa ni tanlang.",
        "en": "{gpu_name} does not support FlashAttention-2: choose sdpa."},
    "w_gpu_no_bitsandbytes": {
        "ru": "bitsandbytes не поддерживает {gpu_name}.",
        "uz": "bitsandbytes {gpu_name} ni qo‘llamaydi.",
        "en": "bitsandbytes does not support {gpu_name}."},
}
